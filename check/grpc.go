package check

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/engine/probe"
)

// maxHealthResponseBytes caps a health response (a few bytes when sane).
const maxHealthResponseBytes = 64 << 10

// grpcChecker runs a grpc probe: grpc.health.v1.Health/Check over one
// ClientConn that it keeps across checks and closes in Close.
type grpcChecker struct {
	conn    *grpc.ClientConn
	health  healthpb.HealthClient
	service string

	mu    sync.Mutex
	guard *connGuard // guarded by mu: the running check's, nil between checks
}

// newGRPCChecker creates the (lazy) ClientConn of g: nothing is dialed
// until the first Check. It uses TLS when g.TLS is set (verified unless
// g.TLS says otherwise), else plaintext, and dials through the shared
// dialer so that the Policy applies to every connection the channel opens
// (without SO_LINGER: the connection is long-lived, not one per check).
// A connection is dialed when a check needs one, under that check's
// connGuard: the dial, the TLS handshake and the HTTP/2 preface end with
// the check. The header list a server may send (a status message rides in
// it) is bounded by o.MaxHeaderBytes.
func newGRPCChecker(g *probe.GRPC, o *Options) (*grpcChecker, error) {
	creds := insecure.NewCredentials()
	if g.TLS != nil {
		cfg, err := tlsConfig(g.TLS)
		if err != nil {
			return nil, fmt.Errorf("grpc.%w", err)
		}
		creds = credentials.NewTLS(cfg)
	}
	d := newDialer(o.Policy, false)
	addr := net.JoinHostPort(g.Host, strconv.Itoa(int(g.Port)))
	// passthrough: the dialer resolves the name on each connection, as
	// kubelet's dial does; an IPv6 zone's '%' must be escaped in the URL.
	target := "passthrough:///" + strings.ReplaceAll(addr, "%", "%25")
	c := &grpcChecker{}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			if g := c.currentGuard(); g != nil {
				return g.dial(ctx, d, "tcp", addr)
			}
			return d.DialContext(ctx, "tcp", addr)
		}),
		grpc.WithNoProxy(),
		grpc.WithUserAgent(o.UserAgent),
		grpc.WithMaxHeaderListSize(uint32(o.MaxHeaderBytes)),
		// Wait for a connection until the probe's deadline, as kubelet's
		// blocking dial does, rather than failing at once while the
		// channel is still connecting or backing off.
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(maxHealthResponseBytes)),
	)
	if err != nil {
		return nil, fmt.Errorf("grpc: %w", err)
	}
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	c.conn, c.health, c.service = conn, healthpb.NewHealthClient(conn), service
	return c, nil
}

func (c *grpcChecker) currentGuard() *connGuard {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.guard
}

func (c *grpcChecker) setGuard(g *connGuard) {
	c.mu.Lock()
	c.guard = g
	c.mu.Unlock()
}

// Check calls Health/Check for the probe's service within ctx. Only
// SERVING succeeds, with the message "service healthy". Failures read, as
// kubelet's do: `service unhealthy (responded with "NOT_SERVING")`, "error:
// this server does not implement the grpc health protocol
// (grpc.health.v1.Health): <status message>", or "error: health rpc failed:
// <error>" for anything else (unknown service, connection failure,
// deadline).
func (c *grpcChecker) Check(ctx context.Context) probe.Outcome {
	start := time.Now()
	// The guard ends what this check dialed when the check returns (at
	// its deadline at the latest), not on the deadline itself: the RPC
	// then fails with the deadline, not with a connection closed under it.
	gctx, end := context.WithCancel(context.Background())
	defer end()
	g := newConnGuard(gctx)
	c.setGuard(g)
	defer c.setGuard(nil)
	if c.conn.GetState() == connectivity.TransientFailure {
		// The target was down; retry now instead of after the channel's
		// backoff, which may be longer than the probe's timeout.
		c.conn.ResetConnectBackoff()
	}
	res, msg := probe.Failure, ""
	resp, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{Service: c.service})
	if c.conn.GetState() == connectivity.Ready {
		// Established: keep the connection for the next checks.
		g.release()
	}
	switch {
	case err != nil:
		msg = healthError(err)
	case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
		msg = fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String())
	default:
		res, msg = probe.Success, "service healthy"
	}
	return probe.Outcome{Result: res, Message: probe.BoundMessage(msg), Latency: time.Since(start)}
}

// healthError is the message of a failed Health/Check RPC.
func healthError(err error) string {
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented {
		return "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): " + st.Message()
	}
	return "error: health rpc failed: " + err.Error()
}

// Close closes the checker's ClientConn; Check must not be called after.
func (c *grpcChecker) Close() { _ = c.conn.Close() }
