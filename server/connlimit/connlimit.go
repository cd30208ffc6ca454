// Package connlimit bounds the connections a listener hands to the gRPC
// server: in all, per peer IP address, and those not yet admitted — a
// connection is admitted once one of its calls passes authentication
// (Listener.Admit, called from the server's header-time check). A
// connection not admitted within a deadline is closed. Together with a
// cap on streams per connection, this bounds what a client without
// credentials can make probed hold: a few goroutines and buffers per
// connection, for a few seconds, on a bounded number of connections.
package connlimit

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Options bound a Listener; a zero bound is no bound.
type Options struct {
	// Max is how many connections may be open at once.
	Max int
	// PerIP is how many connections one peer IP address may have open at
	// once.
	PerIP int
	// Pending is how many connections may be open at once without having
	// been admitted.
	Pending int
	// AdmitWithin is how long a connection may stay open without being
	// admitted before it is closed.
	AdmitWithin time.Duration
	// Clock drives AdmitWithin; default: the real clock.
	Clock  clockwork.Clock
	Logger *slog.Logger
}

// Stats counts what a Listener did.
type Stats struct {
	Open, Pending int // connections open now, and those of them not admitted
	Refused       int // connections closed at accept, over a bound
	Expired       int // connections closed for not being admitted in time
}

// Listener is a net.Listener whose Accept closes, at once, the connections
// over its bounds, and closes the connections not admitted in time. It is
// safe for concurrent use.
type Listener struct {
	net.Listener
	opts Options

	mu      sync.Mutex
	stats   Stats              // guarded by mu
	warned  time.Time          // when the last warning was logged; guarded by mu
	shown   Stats              // stats as of the last warning; guarded by mu
	perIP   map[netip.Addr]int // open connections per peer IP; guarded by mu
	waiting map[string]*conn   // connections not admitted, by remote address; guarded by mu
}

// Wrap returns l bounded by opts.
func Wrap(l net.Listener, opts Options) *Listener {
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{Listener: l, opts: opts, perIP: make(map[netip.Addr]int), waiting: make(map[string]*conn)}
}

// Accept returns the next connection within the bounds; those over them
// are closed (with a reset, so they leave no TIME_WAIT behind) and not
// returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, over := l.track(nc)
		if c != nil {
			return c, nil
		}
		l.opts.Logger.Debug("connection refused", "peer", nc.RemoteAddr().String(), "bound", over)
		l.warn()
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = nc.Close()
	}
}

// track counts nc in, or returns the name of the bound it would pass.
func (l *Listener) track(nc net.Conn) (*conn, string) {
	ip := peerIP(nc.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.opts.Max > 0 && l.stats.Open >= l.opts.Max:
		l.stats.Refused++
		return nil, "connections in all"
	case l.opts.PerIP > 0 && l.perIP[ip] >= l.opts.PerIP:
		l.stats.Refused++
		return nil, "connections per IP address"
	case l.opts.Pending > 0 && l.stats.Pending >= l.opts.Pending:
		l.stats.Refused++
		return nil, "connections not authenticated"
	}
	c := &conn{Conn: nc, l: l, ip: ip, key: nc.RemoteAddr().String()}
	l.stats.Open++
	l.stats.Pending++
	l.perIP[ip]++
	l.waiting[c.key] = c
	if l.opts.AdmitWithin > 0 {
		c.timer = l.opts.Clock.AfterFunc(l.opts.AdmitWithin, c.expire)
	}
	return c, ""
}

// Admit marks the connection whose remote address is peer as admitted:
// it is no longer closed for want of authentication, nor counted as
// pending. Admitting an unknown or already admitted connection does
// nothing.
func (l *Listener) Admit(peer net.Addr) {
	if peer == nil {
		return
	}
	l.AdmitRemote(peer.String())
}

// AdmitRemote is Admit for the remote address as a string, as
// net/http's Request.RemoteAddr gives it.
func (l *Listener) AdmitRemote(peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiting) == 0 {
		return
	}
	c, ok := l.waiting[peer]
	if !ok {
		return
	}
	c.admitLocked()
}

// warnEvery is how often, at most, refused and expired connections are
// logged at warning level (each one is logged at debug level).
const warnEvery = time.Minute

// warn logs, at most every warnEvery, how many connections were refused
// or closed since the last warning.
func (l *Listener) warn() {
	l.mu.Lock()
	now := l.opts.Clock.Now()
	if !l.warned.IsZero() && now.Sub(l.warned) < warnEvery {
		l.mu.Unlock()
		return
	}
	st, shown := l.stats, l.shown
	l.warned, l.shown = now, st
	l.mu.Unlock()
	l.opts.Logger.Warn("connections refused over the connection bounds, or closed with no authenticated call in time",
		"refused", st.Refused-shown.Refused, "expired", st.Expired-shown.Expired, "open", st.Open, "pending", st.Pending)
}

// Stats returns the counts so far.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// conn is an accepted connection, counted until it is closed.
type conn struct {
	net.Conn
	l     *Listener
	ip    netip.Addr
	key   string          // remote address
	timer clockwork.Timer // nil without a deadline

	// Guarded by l.mu.
	admitted, closed bool
}

// admitLocked stops the deadline; l.mu held.
func (c *conn) admitLocked() {
	if c.admitted || c.closed {
		return
	}
	c.admitted = true
	c.l.stats.Pending--
	delete(c.l.waiting, c.key)
	if c.timer != nil {
		c.timer.Stop()
	}
}

// expire closes the connection if it was not admitted.
func (c *conn) expire() {
	c.l.mu.Lock()
	expired := !c.admitted && !c.closed
	if expired {
		c.l.stats.Expired++
	}
	c.l.mu.Unlock()
	if expired {
		c.l.opts.Logger.Debug("connection closed: no authenticated call in time", "peer", c.key, "within", c.l.opts.AdmitWithin)
		_ = c.Close()
		c.l.warn()
	}
}

// Close closes the connection and uncounts it.
func (c *conn) Close() error {
	c.l.mu.Lock()
	if !c.closed {
		c.closed = true
		c.l.stats.Open--
		if c.l.perIP[c.ip]--; c.l.perIP[c.ip] == 0 {
			delete(c.l.perIP, c.ip)
		}
		if !c.admitted {
			c.l.stats.Pending--
			if c.l.waiting[c.key] == c {
				delete(c.l.waiting, c.key)
			}
		}
		if c.timer != nil {
			c.timer.Stop()
		}
	}
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// peerIP is the IP address of a remote address (the zero Addr when it has
// none, e.g. a Unix socket: all such peers share one count).
func peerIP(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case nil:
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
