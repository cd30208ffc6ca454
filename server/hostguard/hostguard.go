// Package hostguard keeps web pages from reaching probed's HTTP listeners
// (the status page, metrics) through a browser. DNS rebinding makes a
// hostile site's name resolve to probed's address, so the browser sends
// that site's name as the Host; a cross-site request (an EventSource, a
// fetch) carries the other site's Origin. Neither is a request for
// probed's page, and both are refused with 403 Forbidden.
package hostguard

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Guard checks the Host and Origin headers of requests.
type Guard struct {
	names []string // lower case, without a final dot
	any   bool     // "*": every host
}

// New returns a guard that accepts, as the Host of a request:
//
//   - an IP address (a browser sends one only when the user typed it, and
//     no DNS answer can make another site's page send it);
//   - "localhost" and names under ".localhost" (RFC 6761: always this
//     host);
//   - the host names of listen (the addresses probed listens on, "host:port",
//     when they are names);
//   - the names in allowed (the names probed is reached by, e.g. behind a
//     reverse proxy); "*" accepts every host, turning the check off.
//
// Every request with an Origin header must come from the page's own
// origin (the scheme, and the host and port of its Host).
func New(listen []string, allowed []string) *Guard {
	g := &Guard{}
	for _, addr := range listen {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		if _, err := netip.ParseAddr(host); err != nil && host != "" {
			g.names = append(g.names, normalize(host))
		}
	}
	for _, h := range allowed {
		if h == "*" {
			g.any = true
			continue
		}
		g.names = append(g.names, normalize(h))
	}
	return g
}

func normalize(host string) string { return strings.TrimSuffix(strings.ToLower(host), ".") }

// Wrap returns h guarded: a request with a Host or an Origin that is not
// accepted gets 403 Forbidden, saying why.
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.HostAllowed(r.Host) {
			http.Error(w, "forbidden: host "+quote(r.Host)+" is not one probed serves under "+
				"(a DNS-rebinding guard); reach it by its IP address or localhost, or list the name in --allowed-hosts", http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r) {
			http.Error(w, "forbidden: a request from another origin ("+quote(origin)+")", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// HostAllowed reports whether a request's Host header ("host[:port]") is
// one the guard accepts.
func (g *Guard) HostAllowed(hostport string) bool {
	if g.any {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = normalize(host)
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || slices.Contains(g.names, host)
}

// sameOrigin reports whether origin (a browser's Origin header) is r's own
// origin: the scheme r was served over and r's Host, with default ports
// made explicit.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" && u.Path != "/" {
		return false // "null", or not an origin
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(withPort(u.Host, scheme), withPort(r.Host, scheme))
}

func withPort(hostport, scheme string) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	if scheme == "https" {
		return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), "443")
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), "80")
}

// quote quotes s for an error page, clipped: it is the client's.
func quote(s string) string {
	if len(s) > 128 {
		s = s[:128]
	}
	return strconv.Quote(s)
}
