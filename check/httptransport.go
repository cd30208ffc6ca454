package check

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"time"

	"github.com/probed/probed/engine/probe"
)

// maxIdleConns bounds the connections one HTTP checker keeps open between
// checks: one per origin (scheme, host, port) its probe reaches, the
// probe's own and those of same-host redirects.
const maxIdleConns = maxRedirects + 1

// readBufferSize is the size of the read buffer a check borrows from a
// pool for each exchange (net/http's per-connection default).
const readBufferSize = 4 << 10

// aLongTimeAgo is a deadline in the past: set on a connection, it makes
// every blocked and later read or write on it fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// readers are the read buffers of exchanges in progress: an idle
// connection holds none.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufferSize) }}

// getRequest is what http.ReadResponse needs to know of the request a
// response answers: its method (a GET's response may have a body).
var getRequest = &http.Request{Method: http.MethodGet}

// httpTransport is one HTTP checker's connections. It dials, hands a
// connection to one exchange at a time and keeps it open afterwards when
// HTTP allows it (keep-alive), so the next check reuses it. Everything
// runs on the checking goroutine: the dial, the TLS handshake, writing the
// request and reading the response, each bounded by the check's context.
// An idle connection holds a file descriptor and no goroutine or buffer;
// one idle for idleConnTimeout is closed by a timer.
type httpTransport struct {
	dialer    *net.Dialer
	tls       *tls.Config                 // for HTTPS, ServerName set; nil until a connection needs it
	newTLS    func() (*tls.Config, error) // builds tls
	keepAlive bool
	maxHeader int64 // bytes of a response's status line and header (1xx responses included)

	// ex is the exchange in progress: a checker runs one check at a time,
	// and a check one exchange at a time.
	ex exchange

	mu     sync.Mutex
	idle   []*httpConn // guarded by mu; each idle since its idleSince
	timer  *time.Timer // guarded by mu; closes connections idle for idleConnTimeout
	closed bool        // guarded by mu
}

func newHTTPTransport(dialer *net.Dialer, tlsCfg *tls.Config, newTLS func() (*tls.Config, error), keepAlive bool, maxHeader int) *httpTransport {
	return &httpTransport{dialer: dialer, tls: tlsCfg, newTLS: newTLS, keepAlive: keepAlive, maxHeader: int64(maxHeader)}
}

// httpConn is one connection of an httpTransport.
type httpConn struct {
	key       string    // scheme "://" host:port, what the connection serves
	conn      net.Conn  // what requests and responses go through: raw, or TLS over it
	idleSince time.Time // when it was last put back
	// limit is how many more bytes Read may return (net/http's readLimit):
	// the header cap while a response head is read, no limit afterwards.
	limit int64
	// stop ends the watch of the current exchange's context (see watch).
	stop func() bool
	// cut makes every read and write on the TCP connection fail at once
	// (built once).
	cut func()
}

// errHeaderLimit is what a read past a response head's cap returns.
var errHeaderLimit = errors.New("read limit exhausted")

func (pc *httpConn) Read(p []byte) (int, error) {
	if pc.limit <= 0 {
		return 0, errHeaderLimit
	}
	if int64(len(p)) > pc.limit {
		p = p[:pc.limit]
	}
	n, err := pc.conn.Read(p)
	pc.limit -= int64(n)
	return n, err
}

// watch makes every read and write on pc fail once ctx is done, until
// unwatch. It costs no goroutine: the context runs the callback.
func (pc *httpConn) watch(ctx context.Context) {
	pc.stop = context.AfterFunc(ctx, pc.cut)
}

// unwatch ends the watch and reports whether pc is still usable: false
// when ctx ended first (its deadline then lies in the past).
func (pc *httpConn) unwatch() bool {
	if pc.stop == nil {
		return true
	}
	ok := pc.stop()
	pc.stop = nil
	return ok
}

// close closes pc (ending its watch).
func (pc *httpConn) close() {
	pc.unwatch()
	_ = pc.conn.Close()
}

// connKey is the key of the connections that serve u: net/http's, its
// scheme and canonical address.
func connKey(u *url.URL) string { return u.Scheme + "://" + canonicalAddr(u) }

// canonicalAddr is u's host and port, the port defaulted from the scheme.
func canonicalAddr(u *url.URL) string { return net.JoinHostPort(u.Hostname(), port(u)) }

// take returns an idle connection for key, or nil.
func (t *httpTransport) take(key string) *httpConn {
	t.mu.Lock()
	var pc *httpConn
	for i := len(t.idle) - 1; i >= 0; i-- {
		if t.idle[i].key == key {
			pc = t.idle[i]
			t.idle = append(t.idle[:i], t.idle[i+1:]...)
			break
		}
	}
	t.mu.Unlock()
	return pc
}

// put keeps pc for a later check, or closes it when the transport does
// not keep connections, is closed, or already keeps maxIdleConns.
func (t *httpTransport) put(pc *httpConn) {
	if !t.keepAlive {
		pc.close()
		return
	}
	pc.idleSince = time.Now()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		pc.close()
		return
	}
	var evicted *httpConn
	if len(t.idle) == maxIdleConns {
		evicted = t.idle[0]
		t.idle = append(t.idle[:0], t.idle[1:]...)
	}
	t.idle = append(t.idle, pc)
	if t.timer == nil {
		t.timer = time.AfterFunc(idleConnTimeout, t.expire)
	}
	t.mu.Unlock()
	if evicted != nil {
		evicted.close()
	}
}

// expire closes the connections idle for idleConnTimeout and sets the
// timer for the next one to expire, if any.
func (t *httpTransport) expire() {
	now := time.Now()
	var expired []*httpConn
	t.mu.Lock()
	kept := t.idle[:0]
	next := time.Duration(0)
	for _, pc := range t.idle {
		left := idleConnTimeout - now.Sub(pc.idleSince)
		if left <= 0 {
			expired = append(expired, pc)
			continue
		}
		kept = append(kept, pc)
		if next == 0 || left < next {
			next = left
		}
	}
	clear(t.idle[len(kept):])
	t.idle = kept
	switch {
	case t.closed:
	case next > 0:
		t.timer.Reset(next)
	default:
		t.timer = nil // put starts another one
	}
	t.mu.Unlock()
	for _, pc := range expired {
		pc.close()
	}
}

// close closes every idle connection; a connection put back later is
// closed at once.
func (t *httpTransport) close() {
	t.mu.Lock()
	t.closed = true
	idle := t.idle
	t.idle = nil
	if t.timer != nil {
		t.timer.Stop()
	}
	t.mu.Unlock()
	for _, pc := range idle {
		pc.close()
	}
}

// exchange is one request on one connection, from the request written to
// the response's body read.
type exchange struct {
	t     *httpTransport
	pc    *httpConn
	br    *bufio.Reader
	resp  *http.Response
	plain *plainAnswer // resp's, when plainResponse read it; back to plainAnswers at done
}

// roundTrip writes req (a whole GET request) for u, whose connections
// have key (connKey), and reads the head of its response (1xx responses
// skipped), adding the phases it takes to ph: DNS and connect when it
// dials, TLS when it handshakes, first byte from the request written to
// the first byte of the response. A kept connection is reused. When a
// reused connection fails before any byte of a response arrives — the
// server closed it while it was idle, or as the request was written — or
// answers 408 (a server announces so that it timed out an idle
// connection), the request is sent once more on a new connection: it
// cannot have been processed, and net/http does the same for requests
// that are safe to repeat. The caller reads the body and ends the
// exchange with done.
func (t *httpTransport) roundTrip(ctx context.Context, u *url.URL, key string, req []byte, ph *probe.Phases) (*exchange, error) {
	pc := t.take(key)
	for {
		reused := pc != nil
		if !reused {
			var err error
			if pc, err = t.dial(ctx, u, key, ph); err != nil {
				return nil, err
			}
		} else {
			pc.watch(ctx)
		}
		ex, answered, err := t.exchange(ctx, pc, req, ph)
		switch {
		case err == nil && reused && ex.resp.StatusCode == http.StatusRequestTimeout:
			ex.done(false)
		case err == nil:
			return ex, nil
		default:
			pc.close()
			if !reused || answered || ctx.Err() != nil {
				return nil, err
			}
		}
		pc = nil // stale: once more on a new connection
	}
}

// dial connects to u (through the checker's dialer: the target policy
// and SO_LINGER apply) and, for HTTPS, completes the TLS handshake. It
// returns the connection watching ctx.
func (t *httpTransport) dial(ctx context.Context, u *url.URL, key string, ph *probe.Phases) (*httpConn, error) {
	var dt dialTrace
	raw, err := t.dialer.DialContext(httptrace.WithClientTrace(ctx, dt.clientTrace()), "tcp", canonicalAddr(u))
	dt.addTo(ph)
	if err != nil {
		return nil, err
	}
	pc := &httpConn{key: key, conn: raw, cut: func() { _ = raw.SetDeadline(aLongTimeAgo) }}
	pc.watch(ctx)
	if u.Scheme != "https" {
		return pc, nil
	}
	if t.tls == nil {
		// An HTTP probe redirected to HTTPS (the checking goroutine alone
		// sets it).
		if t.tls, err = t.newTLS(); err != nil {
			pc.close()
			return nil, err
		}
	}
	tc := tls.Client(raw, t.tls)
	start := time.Now()
	err = tc.Handshake()
	ph.TLS += time.Since(start)
	if err != nil {
		pc.close()
		return nil, ctxErr(ctx, err)
	}
	pc.conn = tc
	return pc, nil
}

// exchange writes req on pc and reads the head of the response. answered
// reports whether any byte of a response arrived (a failure before it
// leaves the request safe to send again).
func (t *httpTransport) exchange(ctx context.Context, pc *httpConn, req []byte, ph *probe.Phases) (ex *exchange, answered bool, err error) {
	if _, err := pc.conn.Write(req); err != nil {
		return nil, false, ctxErr(ctx, err)
	}
	wrote := time.Now()
	br := readers.Get().(*bufio.Reader)
	br.Reset(pc)
	defer func() {
		if err != nil {
			br.Reset(nil)
			readers.Put(br)
		}
	}()
	pc.limit = t.maxHeader
	if _, err := br.Peek(1); err != nil {
		if pc.limit <= 0 {
			return nil, false, t.headerTooLarge()
		}
		return nil, false, ctxErr(ctx, err)
	}
	ph.FirstByte += time.Since(wrote)
	for {
		if a := plainAnswers.Get().(*plainAnswer); plainResponse(br, &a.resp, &a.body) {
			pc.limit = 1<<63 - 1 // the body has its own bound
			t.ex = exchange{t: t, pc: pc, br: br, resp: &a.resp, plain: a}
			return &t.ex, true, nil
		} else {
			plainAnswers.Put(a)
		}
		resp, err := http.ReadResponse(br, getRequest) //nolint:bodyclose // the exchange owns the body: exchange.done ends it
		if err != nil {
			if pc.limit <= 0 {
				return nil, true, t.headerTooLarge()
			}
			return nil, true, ctxErr(ctx, err)
		}
		// 1xx responses but 101 are informational: the answer follows,
		// within the same header cap.
		if resp.StatusCode >= 100 && resp.StatusCode <= 199 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		pc.limit = 1<<63 - 1 // the body has its own bound
		t.ex = exchange{t: t, pc: pc, br: br, resp: resp}
		return &t.ex, true, nil
	}
}

func (t *httpTransport) headerTooLarge() error {
	return fmt.Errorf("server response headers exceeded %d bytes; aborted", t.maxHeader)
}

// done ends the exchange. The connection is kept for the next check when
// the body was read to its end (complete), nothing follows it, HTTP lets
// the connection live on and the check's context did not end; otherwise
// it is closed.
func (ex *exchange) done(complete bool) {
	reusable := complete && !ex.resp.Close && ex.resp.StatusCode >= 200 && ex.br.Buffered() == 0
	ex.br.Reset(nil)
	readers.Put(ex.br)
	if a := ex.plain; a != nil {
		*a = plainAnswer{}
		plainAnswers.Put(a)
	}
	t, pc := ex.t, ex.pc
	*ex = exchange{}
	if !pc.unwatch() || !reusable {
		pc.close()
		return
	}
	t.put(pc)
}

// ctxErr is err, or the cause of ctx's end when ctx ended: a read or
// write cut off by the check's end reports why it ended (net/http's
// convention), not the deadline set to cut it.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// bodies are the buffers bodies are read into, DefaultMaxBodyBytes and
// one byte each.
var bodies = sync.Pool{New: func() any {
	b := make([]byte, DefaultMaxBodyBytes+1)
	return &b
}}

// readBody reads r up to n bytes into a buffer from bodies (or a new one
// when n is larger); complete reports whether r ended within them (more
// is dropped without error). Return the buffer with freeBody once body is
// no longer used.
func readBody(r io.Reader, n int) (body []byte, buf *[]byte, complete bool, err error) {
	buf = bodies.Get().(*[]byte)
	if len(*buf) < n+1 {
		bodies.Put(buf)
		b := make([]byte, n+1)
		buf = &b
	}
	// One byte more than n tells a body of exactly n bytes from a longer
	// one.
	b := (*buf)[:n+1]
	read := 0
	for read < len(b) && err == nil {
		var k int
		k, err = r.Read(b[read:])
		read += k
	}
	if errors.Is(err, io.EOF) {
		err = nil
		complete = read <= n
	}
	return b[:min(read, n)], buf, complete, err
}

// freeBody returns a buffer of readBody.
func freeBody(buf *[]byte) {
	if len(*buf) == DefaultMaxBodyBytes+1 {
		bodies.Put(buf)
	}
}

// dialTrace times the DNS lookup and the connect of one dial. Its hooks
// may run on several goroutines (DNS and happy-eyeballs dials), hence mu.
type dialTrace struct {
	mu        sync.Mutex
	dns       time.Duration // guarded by mu
	connect   time.Duration // guarded by mu
	dnsStart  time.Time     // guarded by mu
	connStart time.Time     // guarded by mu; first ConnectStart
	connected bool          // guarded by mu; a connect succeeded
}

func (t *dialTrace) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) {
			t.mu.Lock()
			t.dnsStart = time.Now()
			t.mu.Unlock()
		},
		DNSDone: func(httptrace.DNSDoneInfo) {
			t.mu.Lock()
			if !t.dnsStart.IsZero() {
				t.dns += time.Since(t.dnsStart)
				t.dnsStart = time.Time{}
			}
			t.mu.Unlock()
		},
		ConnectStart: func(string, string) {
			t.mu.Lock()
			if t.connStart.IsZero() {
				t.connStart = time.Now()
			}
			t.mu.Unlock()
		},
		ConnectDone: func(_, _ string, err error) {
			t.mu.Lock()
			// Count the first successful connect only: happy eyeballs may
			// race two and discard one.
			if err == nil && !t.connected && !t.connStart.IsZero() {
				t.connect = time.Since(t.connStart)
				t.connected = true
			}
			t.mu.Unlock()
		},
	}
}

// addTo adds the dial's phases to ph.
func (t *dialTrace) addTo(ph *probe.Phases) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ph.DNS += t.dns
	ph.Connect += t.connect
}
