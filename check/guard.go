package check

import (
	"context"
	"net"
	"sync"
)

// connGuard bounds the connection phases of one check — the dial, the TLS
// handshake, an HTTP/2 preface — by the check's context, and closes what
// they opened when the check ends first.
//
// Clients dial in the background, detached from the request that needs
// the connection (net/http keeps a dial going after its request is
// cancelled, so that a later request may use the connection; gRPC
// connects under its own 20 s deadline): a target that accepts the TCP
// connection and never finishes the handshake would otherwise hold a
// socket and goroutines per probe. A guard cancels its check's dials when
// the check ends, and closes every connection they opened that was not
// released first (established and handed over to its client, whose
// request is cancelled with the check, and which may keep it alive).
type connGuard struct {
	ctx context.Context // ends the guarded phases: the check's, or one that ends when it returns

	mu    sync.Mutex
	stops []func() bool // guarded by mu: AfterFuncs closing the connections
}

func newConnGuard(ctx context.Context) *connGuard { return &connGuard{ctx: ctx} }

// dial connects with d, cancelled when the check ends, and closes the
// connection when the check ends before it is released. ctx carries the
// dial's own deadline and values (it may outlive the check).
func (g *connGuard) dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(g.ctx, cancel)
	conn, err := d.DialContext(ctx, network, addr)
	stop()
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// On a check that has ended already, this closes conn at once.
	g.stops = append(g.stops, context.AfterFunc(g.ctx, func() { _ = conn.Close() }))
	return conn, nil
}

// release hands the connections dialed so far over to their client: they
// stay open after the check. Call it only when they are established (the
// client took the connection for a request, or reports it ready): a
// connection still in its handshake must stay guarded. Later dials are
// guarded again.
func (g *connGuard) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, stop := range g.stops {
		stop()
	}
	g.stops = nil
}

type guardKey struct{}

// withGuard returns ctx carrying g, for dialers that receive a context
// derived from the check's (net/http passes the request's values, not its
// cancellation, to its dials).
func withGuard(ctx context.Context, g *connGuard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// guardFrom returns the guard ctx carries, or nil.
func guardFrom(ctx context.Context) *connGuard {
	g, _ := ctx.Value(guardKey{}).(*connGuard)
	return g
}
