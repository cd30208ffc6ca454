// Package tcpproxy is a TCP proxy on loopback for tests, which can be
// paused to cut a process off from a server (a network partition) and
// resumed to heal it, or put in front of several servers as one address
// (a Service in front of replicas) that fails over to the next when one
// is gone.
package tcpproxy

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards every connection made to Addr to an upstream address:
// the first of its upstreams, in order, that accepts the connection.
// Pause makes it a black hole: bytes in flight and new connections are
// held, nothing is refused or reset, as when a network drops packets.
// Resume lets them through again; Cut closes the connections open. It stops when the test ends.
type Proxy struct {
	lis       net.Listener
	upstreams []string

	mu     sync.Mutex
	paused bool
	resume chan struct{}         // closed by Resume; guarded by mu
	conns  map[net.Conn]struct{} // guarded by mu
	closed bool                  // guarded by mu
	wg     sync.WaitGroup
}

// Start starts a proxy to upstream (host:port) on a port of 127.0.0.1.
func Start(t testing.TB, upstream string) *Proxy {
	t.Helper()
	return StartFailover(t, upstream)
}

// StartFailover starts a proxy on a port of 127.0.0.1 in front of
// upstreams (host:port): each connection goes to the first of them that
// accepts it, so that once a server is gone (killed: its port refuses)
// the connections made from then on go to the next, as a Service's
// would. A connection open to a server that dies is closed, as the
// server's end of it was.
func StartFailover(t testing.TB, upstreams ...string) *Proxy {
	t.Helper()
	if len(upstreams) == 0 {
		t.Fatalf("tcpproxy: no upstream")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tcpproxy: %v", err)
	}
	p := &Proxy{lis: lis, upstreams: upstreams, resume: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// Pause holds every byte in both directions, of the connections open and
// of those made meanwhile, until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.resume = make(chan struct{})
	}
}

// Resume lets held and new bytes through again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resume)
	}
}

// Cut closes every connection open now, as a peer's crash or a NAT that
// forgot them would; with Pause first, the reconnections are held.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// gate waits while the proxy is paused; false once it is closed.
func (p *Proxy) gate() bool {
	for {
		p.mu.Lock()
		paused, resume, closed := p.paused, p.resume, p.closed
		p.mu.Unlock()
		switch {
		case closed:
			return false
		case !paused:
			return true
		}
		<-resume
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// track records c to close it with the proxy; false once closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// serve connects c to the first upstream that accepts, once the proxy
// is not paused, and copies both ways; c is closed if none accepts.
func (p *Proxy) serve(c net.Conn) {
	defer p.forget(c)
	if !p.gate() {
		return
	}
	up := p.dial()
	if up == nil {
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.forget(up)
	var both sync.WaitGroup
	both.Go(func() { p.copy(up, c) })
	both.Go(func() { p.copy(c, up) })
	both.Wait()
}

// copy copies from src to dst, holding each chunk while paused, until
// either side fails; then it closes both.
func (p *Proxy) copy(dst, src net.Conn) {
	defer func() {
		_ = dst.Close()
		_ = src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a failure: either way the connection is over
		}
	}
}

// dial connects to the first upstream that accepts; nil if none does.
func (p *Proxy) dial() net.Conn {
	for _, u := range p.upstreams {
		if up, err := net.Dial("tcp", u); err == nil {
			return up
		}
	}
	return nil
}

func (p *Proxy) forget(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// close stops the proxy: its listener and every connection, and waits for
// its goroutines.
func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	if p.paused {
		p.paused = false
		close(p.resume)
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.lis.Close()
	p.wg.Wait()
}
