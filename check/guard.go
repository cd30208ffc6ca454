package check

import (
	"context"
	"net"
)

// connGuard bounds the connection phases of one check — the dial, the TLS
// handshake, an HTTP/2 preface — by the check's context, and closes what
// they opened when the check ends.
//
// gRPC dials in the background, detached from the call that needs the
// connection (under its own 20 s deadline): a target that accepts the TCP
// connection and never finishes the handshake would otherwise hold a
// socket and goroutines per probe. A guard cancels its check's dials when
// the check ends, and closes every connection they opened (a gRPC probe
// opens its channel for one check). The HTTP checker needs none: it dials
// on the checking goroutine, under the check's context.
type connGuard struct {
	ctx context.Context // ends the guarded phases: the check's, or one that ends when it returns
}

func newConnGuard(ctx context.Context) *connGuard { return &connGuard{ctx: ctx} }

// dial connects with d, cancelled when the check ends, and closes the
// connection when the check ends. ctx carries the dial's own deadline and
// values (it may outlive the check).
func (g *connGuard) dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(g.ctx, cancel)
	conn, err := d.DialContext(ctx, network, addr)
	stop()
	if err != nil {
		return nil, err
	}
	// On a check that has ended already, this closes conn at once.
	context.AfterFunc(g.ctx, func() { _ = conn.Close() })
	return conn, nil
}
