package check

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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

// httpChecker runs an httpGet probe. It owns one http.Transport, so a
// kept-alive connection is reused by this probe only; Close closes it.
type httpChecker struct {
	url      string      // the probe URL
	header   http.Header // request headers; cloned for each request
	custom   []string    // names of the spec's headers, canonical
	ua       string      // the default User-Agent
	host     string      // Host header override ("" means from the URL)
	expected string      // ExpectedBody ("" means any body)
	maxBody  int
	inject   func(context.Context, http.Header)

	transport *http.Transport
	client    *http.Client
}

// newHTTPChecker prepares the probe of g: its URL, headers, TLS
// configuration and transport. It reports a spec it cannot turn into a
// request as an error.
func newHTTPChecker(g *probe.HTTPGet, o *Options) (*httpChecker, error) {
	u, err := probeURL(g)
	if err != nil {
		return nil, err
	}
	// Set even for HTTP: a same-host redirect may switch to HTTPS.
	tlsCfg, err := tlsConfig(g.TLS)
	if err != nil {
		return nil, fmt.Errorf("httpGet.%w", err)
	}
	header, host := probeHeader(g.Headers, o.UserAgent)
	dialer := newDialer(o.Policy, g.DisableKeepAlive)
	// HTTP/1.1 only (a custom dialer and TLS config without
	// ForceAttemptHTTP2), no proxy and no compression, as kubelet. The
	// dial and the TLS handshake end with the check (guardedDial); the
	// response's header is bounded in bytes.
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            guardedDial(dialer),
		TLSClientConfig:        tlsCfg,
		DisableKeepAlives:      g.DisableKeepAlive,
		DisableCompression:     true,
		MaxIdleConnsPerHost:    1,
		IdleConnTimeout:        idleConnTimeout,
		MaxResponseHeaderBytes: int64(o.MaxHeaderBytes),
	}
	c := &httpChecker{
		url:       u.String(),
		header:    header,
		ua:        o.UserAgent,
		host:      host,
		expected:  g.ExpectedBody,
		maxBody:   o.MaxBodyBytes,
		inject:    o.Inject,
		transport: tr,
	}
	for _, h := range g.Headers {
		c.custom = append(c.custom, http.CanonicalHeaderKey(h.Name))
	}
	c.client = &http.Client{Transport: tr, CheckRedirect: c.checkRedirect}
	return c, nil
}

// guardedDial dials with d under the connGuard of the check the dial is
// for (found in ctx), so that neither the dial nor the TLS handshake that
// follows outlives the check.
func guardedDial(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if g := guardFrom(ctx); g != nil {
			return g.dial(ctx, d, network, addr)
		}
		return d.DialContext(ctx, network, addr)
	}
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

// checkRedirect follows redirects to the same host name, at most
// maxRedirects; a redirect to another host ends the probe with the 3xx
// response (kubelet's followNonLocalRedirects=false). The spec's headers
// (credentials, often) go only where the probe was sent: a redirect that
// changes the scheme or the port gets probed's default headers alone, and
// no Referer.
func (c *httpChecker) checkRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errTooManyRedirects
	}
	if !sameOrigin(req.URL, via[0].URL) {
		for _, name := range c.custom {
			req.Header.Del(name)
		}
		req.Header.Del("Referer") // the previous URL: its query may be a secret
		if req.Header.Get("User-Agent") == "" {
			req.Header.Set("User-Agent", c.ua)
		}
		if req.Header.Get("Accept") == "" {
			req.Header.Set("Accept", "*/*")
		}
	}
	return nil
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
// MaxBodyBytes) equals it. The message of a success is the body, trimmed
// of surrounding white space (invalid UTF-8 replaced), or for a redirect
// to another host, which is not followed, "Probe terminated redirects,
// Response status: 302 Found". A failure reads "HTTP probe failed with
// statuscode: 503", "HTTP probe failed: body "..." does not match the
// expected body "..."" (each quoted body clipped to 64 bytes), "HTTP probe
// failed reading the body: <error>", or is the client's error text (for
// example `Get "http://...": dial tcp ...: connect: connection refused`,
// or "...: too many redirects (stopped after 10)"). Phases are measured
// with httptrace and summed over redirects; a reused connection adds no
// DNS, Connect or TLS time.
//
// Everything the server sends is bounded: the response header by
// Options.MaxHeaderBytes, the body by MaxBodyBytes, the message by
// probe.MaxMessageBytes, and every phase (dial and TLS handshake
// included) by ctx. The values of the URL's query are replaced by
// REDACTED in messages.
func (c *httpChecker) Check(ctx context.Context) probe.Outcome {
	start := time.Now()
	var pt phaseTrace
	g := newConnGuard(ctx)
	trace := pt.clientTrace()
	// The transport hands the request a connection once it is dialed
	// (and its TLS handshake done); from then on the request's own
	// cancellation closes it.
	trace.GotConn = func(httptrace.GotConnInfo) { g.release() }
	res, msg := c.get(withGuard(httptrace.WithClientTrace(ctx, trace), g))
	return probe.Outcome{Result: res, Message: probe.BoundMessage(msg), Latency: time.Since(start), Phases: pt.phases()}
}

func (c *httpChecker) get(ctx context.Context) (probe.Result, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return probe.Failure, redactError(err)
	}
	req.Header = c.header.Clone()
	req.Host = c.host
	if c.inject != nil {
		c.inject(ctx, req.Header)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return probe.Failure, redactError(err)
	}
	defer func() { _ = resp.Body.Close() }()
	// Read even a failing response's body (bounded), so that its
	// connection can be reused.
	body, rerr := readAtMost(resp.Body, c.maxBody)
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return probe.Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	if rerr != nil {
		return probe.Failure, "HTTP probe failed reading the body: " + redactError(rerr)
	}
	if c.expected != "" && string(body) != c.expected {
		return probe.Failure, fmt.Sprintf("HTTP probe failed: body %s does not match the expected body %s",
			quoteClip(string(body)), quoteClip(c.expected))
	}
	if resp.StatusCode >= http.StatusMultipleChoices {
		// The reason phrase is the server's: Check bounds it like the body.
		return probe.Success, "Probe terminated redirects, Response status: " + resp.Status
	}
	return probe.Success, strings.TrimSpace(string(body))
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

// Close closes the checker's idle connection.
func (c *httpChecker) Close() { c.transport.CloseIdleConnections() }

// readAtMost reads r up to n bytes; more is dropped without error.
func readAtMost(r io.Reader, n int) ([]byte, error) {
	// One byte more than n lets a body of exactly n bytes reach EOF, which
	// returns its connection to the pool.
	b, err := io.ReadAll(io.LimitReader(r, int64(n)+1))
	if len(b) > n {
		b = b[:n]
	}
	return b, err
}

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

// phaseTrace times the phases of one probe's requests. Its hooks may run
// on several goroutines (DNS and happy-eyeballs dials), hence mu.
type phaseTrace struct {
	mu        sync.Mutex
	p         probe.Phases // guarded by mu
	dnsStart  time.Time    // guarded by mu
	connStart time.Time    // guarded by mu; first ConnectStart of this connection
	connected bool         // guarded by mu; a dial of this connection succeeded
	tlsStart  time.Time    // guarded by mu
	wrote     time.Time    // guarded by mu
}

func (t *phaseTrace) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn: func(string) {
			t.mu.Lock()
			t.connStart, t.connected = time.Time{}, false
			t.mu.Unlock()
		},
		DNSStart: func(httptrace.DNSStartInfo) { t.mark(&t.dnsStart) },
		DNSDone:  func(httptrace.DNSDoneInfo) { t.add(&t.p.DNS, &t.dnsStart) },
		ConnectStart: func(string, string) {
			t.mu.Lock()
			if t.connStart.IsZero() {
				t.connStart = time.Now()
			}
			t.mu.Unlock()
		},
		ConnectDone: func(_, _ string, err error) {
			t.mu.Lock()
			defer t.mu.Unlock()
			// Count the first successful dial only: happy eyeballs may
			// race two and discard one.
			if err == nil && !t.connected && !t.connStart.IsZero() {
				t.p.Connect += time.Since(t.connStart)
				t.connected = true
			}
		},
		TLSHandshakeStart:    func() { t.mark(&t.tlsStart) },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { t.add(&t.p.TLS, &t.tlsStart) },
		WroteRequest:         func(httptrace.WroteRequestInfo) { t.mark(&t.wrote) },
		GotFirstResponseByte: func() { t.add(&t.p.FirstByte, &t.wrote) },
	}
}

// mark records the start of a phase in *at.
func (t *phaseTrace) mark(at *time.Time) {
	t.mu.Lock()
	*at = time.Now()
	t.mu.Unlock()
}

// add adds the time since *from to *d and clears *from.
func (t *phaseTrace) add(d *time.Duration, from *time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if from.IsZero() {
		return
	}
	*d += time.Since(*from)
	*from = time.Time{}
}

func (t *phaseTrace) phases() probe.Phases {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}
