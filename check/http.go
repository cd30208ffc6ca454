package check

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/probed/probed/engine/probe"
)

// maxRedirects is how many same-host redirects an HTTP probe follows, as
// kubelet does.
const maxRedirects = 10

// idleConnTimeout is how long a kept-alive probe connection may stay idle
// before the transport closes it.
const idleConnTimeout = 90 * time.Second

// errTooManyRedirects ends a probe that was redirected more than
// maxRedirects times.
var errTooManyRedirects = fmt.Errorf("too many redirects (stopped after %d)", maxRedirects)

// quoteLimit is how many bytes of a body a mismatch message quotes.
const quoteLimit = 64

// redacted replaces the values of a probe URL's query in messages: a
// query often carries a credential (?token=...), and messages are
// published, stored and logged.
const redacted = "REDACTED"

// httpChecker runs an httpGet probe. It is an HTTP/1.1 client of its
// own, on the checking goroutine: net/http writes its request (once, at
// Open, unless headers are injected per request), a plain response is
// read without a header map (plainResponse) and any other by
// http.ReadResponse, and its httpTransport keeps the
// connection alive between checks for this probe alone. An idle probe
// holds a file descriptor: no goroutine, no buffer.
type httpChecker struct {
	// headers are the spec's (shared with it): the request's header map
	// is built from them only when a check needs one (see header), since
	// most checks send the request written at Open.
	headers  []probe.Header
	ua       string // the default User-Agent
	host     string // Host header override ("" means from the URL)
	expected string // ExpectedBody ("" means any body)
	maxBody  int
	inject   func(context.Context, http.Header)

	target    *url.URL // url, parsed
	key       string   // of target's connections
	keepAlive bool
	// request is the first request as written, when no header is
	// injected: by the first check (not at Open, so that opening 100,000
	// checkers at a restart does not write 100,000 requests before
	// serving); checks never overlap (engine.Checker). requestErr is why it
	// cannot be written (every check fails with it).
	request    []byte
	requestErr error
	transport  *httpTransport
}

// newHTTPChecker prepares the probe of g: its URL, headers, TLS
// configuration and transport. It reports a spec it cannot turn into a
// request as an error.
func newHTTPChecker(g *probe.HTTPGet, o *Options) (*httpChecker, error) {
	u, err := probeURL(g)
	if err != nil {
		return nil, err
	}
	// Checked even for HTTP: a same-host redirect may switch to HTTPS;
	// built then (most probes never need it).
	tlsCfg, err := probeTLS(g.TLS, u)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "https" {
		tlsCfg = nil
	}
	lazyTLS := func() (*tls.Config, error) { return probeTLS(g.TLS, u) }
	_, host := probeHeader(g.Headers, o.UserAgent)
	// HTTP/1.1 only (no ALPN), no proxy and no compression, as kubelet.
	// The dial and the TLS handshake end with the check; the response's
	// header is bounded in bytes.
	c := &httpChecker{
		headers:   g.Headers,
		ua:        o.UserAgent,
		host:      host,
		expected:  g.ExpectedBody,
		maxBody:   o.MaxBodyBytes,
		inject:    o.Inject,
		target:    u,
		key:       connKey(u),
		keepAlive: !g.DisableKeepAlive,
		transport: newHTTPTransport(o.dialer(g.DisableKeepAlive), tlsCfg, lazyTLS, !g.DisableKeepAlive, o.MaxHeaderBytes),
	}
	return c, nil
}

// firstRequest returns the first request of a check without injected
// headers, writing it on the first call.
func (c *httpChecker) firstRequest() ([]byte, error) {
	if c.request == nil && c.requestErr == nil {
		req, err := c.writeRequest(nil, c.target, c.header(), c.host)
		// Copied to its length: the buffer it was written in grew by
		// doubling, and the checker keeps it as long as the probe lives.
		c.request, c.requestErr = bytes.Clone(req), err
	}
	return c.request, c.requestErr
}

// header returns a new map of the first request's headers: the spec's,
// User-Agent and Accept (see probeHeader).
func (c *httpChecker) header() http.Header {
	h, _ := probeHeader(c.headers, c.ua)
	return h
}

// probeTLS is the TLS configuration of an HTTPS probe of u: t's, with
// u's host as the server name unless t names one (net/http's; redirects
// are followed on that host only).
func probeTLS(t *probe.TLS, u *url.URL) (*tls.Config, error) {
	cfg, err := tlsConfig(t)
	if err != nil {
		return nil, fmt.Errorf("httpGet.%w", err)
	}
	if cfg.ServerName == "" {
		cfg.ServerName = tlsHost(u)
	}
	return cfg, nil
}

// tlsHost is the TLS server name of u: its host, bracketed when IPv6
// (net/http's).
func tlsHost(u *url.URL) string {
	h := canonicalAddr(u)
	return h[:strings.LastIndex(h, ":")]
}

// writeRequest appends to b the GET request of u with header h and Host
// host ("" means u's), as net/http's transport writes it: with
// "Connection: close" when the connection is not kept, and refused when a
// header cannot be sent.
func (c *httpChecker) writeRequest(b []byte, u *url.URL, h http.Header, host string) ([]byte, error) {
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, fmt.Errorf("invalid header field name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, fmt.Errorf("invalid header field value for key %v", k)
			}
		}
	}
	req := &http.Request{
		Method: http.MethodGet, URL: u, Host: host, Header: h,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Close: !c.keepAlive,
	}
	buf := bytes.NewBuffer(b)
	if err := req.Write(buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// probeURL is kubelet's URL for g: scheme HTTP unless HTTPS, host and port
// joined (IPv6 bracketed), path "/" when empty. The path may carry a
// query; it is never read as an authority.
func probeURL(g *probe.HTTPGet) (*url.URL, error) {
	scheme := "http"
	switch g.Scheme {
	case "", probe.SchemeHTTP:
	case probe.SchemeHTTPS:
		scheme = "https"
	default:
		return nil, fmt.Errorf("httpGet.scheme: %q must be HTTP or HTTPS", g.Scheme)
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	p, err := url.ParseRequestURI(path)
	if err != nil {
		return nil, fmt.Errorf("httpGet.path: %w", err)
	}
	return &url.URL{
		Scheme:   scheme,
		Host:     net.JoinHostPort(g.Host, strconv.Itoa(int(g.Port))),
		Path:     p.Path,
		RawPath:  p.RawPath,
		RawQuery: p.RawQuery,
	}, nil
}

// probeHeader builds the request headers as kubelet does: the spec's
// headers, User-Agent ua and Accept "*/*" unless set (an Accept set empty
// is removed). A Host header is returned apart, as the request's Host.
func probeHeader(hs []probe.Header, ua string) (http.Header, string) {
	h := make(http.Header, len(hs)+2)
	for _, x := range hs {
		h.Add(x.Name, x.Value)
	}
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", ua)
	}
	if _, ok := h["Accept"]; !ok {
		h.Set("Accept", "*/*")
	} else if h.Get("Accept") == "" {
		h.Del("Accept")
	}
	host := h.Get("Host")
	h.Del("Host")
	return h, host
}

// redirect returns the request that follows resp, a response to u (the
// n-th request of the check), as net/http's client makes it, or nil when
// resp is the answer: it is not a redirect net/http follows (301, 302,
// 303, 307, 308 with a Location), or it goes to another host name (not
// followed, kubelet's followNonLocalRedirects=false). After maxRedirects
// it fails with errTooManyRedirects, naming the Location. The spec's
// headers (credentials, often) go only where the probe was sent: a
// redirect that changes the scheme or the port gets probed's default
// headers alone, and no Referer. first is the check's first request.
func (c *httpChecker) redirect(resp *http.Response, u *url.URL, n int, first *hop) (*hop, error) {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return nil, nil
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil, nil
	}
	next, err := u.Parse(loc)
	if err != nil {
		return nil, urlError(u, fmt.Errorf("failed to parse Location header %q: %w", loc, err))
	}
	h := &hop{url: next}
	if first.header != nil {
		h.header = first.header.Clone()
	} else {
		h.header = c.header()
	}
	if c.host != "" && c.host != c.target.Host {
		// A Host header set by the spec stays for a relative Location.
		if l, _ := url.Parse(loc); l != nil && !l.IsAbs() {
			h.host = c.host
		}
	}
	if ref := refererForURL(u, next, h.header.Get("Referer")); ref != "" {
		h.header.Set("Referer", ref)
	}
	if next.Hostname() != first.url.Hostname() {
		return nil, nil
	}
	if n >= maxRedirects {
		return nil, &url.Error{Op: "Get", URL: loc, Err: errTooManyRedirects}
	}
	if !sameOrigin(next, first.url) {
		for _, x := range c.headers {
			h.header.Del(x.Name)
		}
		h.header.Del("Referer") // the previous URL: its query may be a secret
		if h.header.Get("User-Agent") == "" {
			h.header.Set("User-Agent", c.ua)
		}
		if h.header.Get("Accept") == "" {
			h.header.Set("Accept", "*/*")
		}
	}
	if user := next.User; user != nil && h.header.Get("Authorization") == "" {
		password, _ := user.Password()
		h.header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user.Username()+":"+password)))
	}
	return h, nil
}

// hop is one request of a check: the first, or one a redirect asked for.
type hop struct {
	url    *url.URL
	header http.Header
	host   string // Host header ("" means the URL's)
}

// refererForURL is net/http's Referer for a redirect from last to next:
// none from HTTPS to HTTP, else the header the request set, else last
// without its user information.
func refererForURL(last, next *url.URL, explicit string) string {
	if last.Scheme == "https" && next.Scheme == "http" {
		return ""
	}
	if explicit != "" {
		return explicit
	}
	referer := last.String()
	if last.User != nil {
		referer = strings.Replace(referer, last.User.String()+"@", "", 1)
	}
	return referer
}

// sameOrigin reports whether a and b have the same scheme, host and port
// (a missing port is the scheme's default).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// Check sends the GET request. It succeeds when the final status is 200 to
// 399 and, when an expected body is set, the body read (at most
// MaxBodyBytes) equals it. The message of a success says the status and
// the body's length, never the body (a page's HTML is no message):
// "HTTP 200, 5 bytes" ("HTTP 200, over 10240 bytes" past MaxBodyBytes), or for a redirect to another host, which is
// not followed, "Probe terminated redirects, Response status: 302 Found".
// A failure reads "HTTP probe failed with statuscode: 503" (with `, body
// "..."` when the response has one, quoted and clipped to 64 bytes: why
// it fails), "HTTP probe failed: body "..." does not match the
// expected body "..."" (each quoted body clipped to 64 bytes), "HTTP probe
// failed reading the body: <error>", or is the client's error text (for
// example `Get "http://...": dial tcp ...: connect: connection refused`,
// or "...: too many redirects (stopped after 10)"). Phases are summed
// over redirects; a reused connection adds no DNS, Connect or TLS time.
//
// Everything the server sends is bounded: the response header by
// Options.MaxHeaderBytes, the body by MaxBodyBytes, the message by
// probe.MaxMessageBytes, and every phase (dial and TLS handshake
// included) by ctx. The values of the URL's query are replaced by
// REDACTED in messages.
func (c *httpChecker) Check(ctx context.Context) probe.Outcome {
	start := time.Now()
	var ph probe.Phases
	res, msg := c.get(ctx, &ph)
	return probe.Outcome{Result: res, Message: probe.BoundMessage(msg), Latency: time.Since(start), Phases: ph}
}

func (c *httpChecker) get(ctx context.Context, ph *probe.Phases) (probe.Result, string) {
	// first.header stays nil (built by redirect if needed) unless headers
	// are injected.
	first := &hop{url: c.target, host: c.host}
	var req []byte
	var reqErr error
	if c.inject != nil {
		first.header = c.header()
		c.inject(ctx, first.header)
		req, reqErr = c.writeRequest(nil, first.url, first.header, first.host)
	} else {
		req, reqErr = c.firstRequest()
	}
	h, key := first, c.key
	for n := 1; ; n++ {
		if reqErr != nil {
			return probe.Failure, redactError(urlError(h.url, reqErr))
		}
		ex, err := c.transport.roundTrip(ctx, h.url, key, req, ph)
		if err != nil {
			return probe.Failure, redactError(urlError(h.url, err))
		}
		next, err := c.redirect(ex.resp, h.url, n, first)
		if next == nil && err == nil {
			return c.answer(ctx, ex)
		}
		// Read a little of the redirect's body, so that its connection
		// can be reused (net/http's 2 KiB).
		_, buf, complete, _ := readBody(ex.resp.Body, 2<<10)
		freeBody(buf)
		ex.done(complete)
		if err != nil {
			return probe.Failure, redactError(err)
		}
		h, key = next, connKey(next.url)
		req, reqErr = c.writeRequest(nil, h.url, h.header, h.host)
	}
}

// answer judges the final response of a check.
func (c *httpChecker) answer(ctx context.Context, ex *exchange) (probe.Result, string) {
	// The response is the exchange's until done: what is judged is read
	// before.
	code, status := ex.resp.StatusCode, ex.resp.Status
	// Read even a failing response's body (bounded), so that its
	// connection can be reused.
	body, buf, complete, rerr := readBody(ex.resp.Body, c.maxBody)
	defer freeBody(buf)
	ex.done(complete)
	if code < http.StatusOK || code >= http.StatusBadRequest {
		msg := fmt.Sprintf("HTTP probe failed with statuscode: %d", code)
		if b := bytes.TrimSpace(body); len(b) > 0 && rerr == nil {
			msg += ", body " + quoteClip(string(b))
		}
		return probe.Failure, msg
	}
	if rerr != nil {
		return probe.Failure, "HTTP probe failed reading the body: " + redactError(ctxErr(ctx, rerr))
	}
	if c.expected != "" && string(body) != c.expected {
		return probe.Failure, fmt.Sprintf("HTTP probe failed: body %s does not match the expected body %s",
			quoteClip(string(body)), quoteClip(c.expected))
	}
	if code >= http.StatusMultipleChoices {
		// The reason phrase is the server's: Check bounds it like the body.
		return probe.Success, "Probe terminated redirects, Response status: " + status
	}
	size := fmt.Sprintf("%d bytes", len(body))
	if !complete {
		size = "over " + size
	}
	return probe.Success, fmt.Sprintf("HTTP %d, %s", code, size)
}

// urlError is err as net/http's client reports it: `Get "URL": err`,
// with a password in the URL masked.
func urlError(u *url.URL, err error) error {
	s := u.String()
	if _, ok := u.User.Password(); ok {
		s = strings.Replace(s, u.User.String()+"@", u.User.Username()+":***@", 1)
	}
	return &url.Error{Op: "Get", URL: s, Err: err}
}

// redactError is err's text with the values of the query of the URL it
// names (a *url.Error's) replaced by REDACTED.
func redactError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redactQuery(ue.URL)
	}
	return err.Error()
}

// redactQuery replaces each value of the query of the URL raw with
// REDACTED ("?token=abc&x" reads "?token=REDACTED&REDACTED"); the
// fragment is dropped.
func redactQuery(raw string) string {
	raw, _, _ = strings.Cut(raw, "#")
	base, query, ok := strings.Cut(raw, "?")
	if !ok || query == "" {
		return raw
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		if k, _, ok := strings.Cut(p, "="); ok {
			params[i] = k + "=" + redacted
		} else if p != "" {
			params[i] = redacted
		}
	}
	return base + "?" + strings.Join(params, "&")
}

// Close closes the checker's idle connections.
func (c *httpChecker) Close() { c.transport.close() }

// quoteClip quotes s, clipped to quoteLimit bytes (on a rune boundary)
// with "..." after the closing quote when clipped.
func quoteClip(s string) string {
	if len(s) <= quoteLimit {
		return strconv.Quote(s)
	}
	n := quoteLimit
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strconv.Quote(s[:n]) + "..."
}
