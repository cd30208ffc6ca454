package check

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/engine/probe"
)

// maxHealthResponseBytes caps a health response (a few bytes when sane).
const maxHealthResponseBytes = 64 << 10

// grpcChecker runs a grpc probe: grpc.health.v1.Health/Check over a
// channel of its own, opened for the check and closed before it returns,
// as kubelet dials for every probe. A channel kept between checks would
// hold four goroutines and ~100 KB per target while idle (see
// docs/decisions.md); a probe costs nothing between checks this way.
type grpcChecker struct {
	target  string // passthrough:///host:port
	dialer  *net.Dialer
	opts    []grpc.DialOption
	service string
}

// newGRPCChecker prepares the channel options of g. It uses TLS when g.TLS
// is set (verified unless g.TLS says otherwise), else plaintext, and dials
// through the shared dialer so that the Policy applies to every connection
// (without SO_LINGER: the connection carries an HTTP/2 exchange and is
// closed by probed after the answer). The header list a server may send
// (a status message rides in it) is bounded by o.MaxHeaderBytes.
func newGRPCChecker(g *probe.GRPC, o *Options) (*grpcChecker, error) {
	creds := insecure.NewCredentials()
	if g.TLS != nil {
		cfg, err := tlsConfig(g.TLS)
		if err != nil {
			return nil, fmt.Errorf("grpc.%w", err)
		}
		creds = credentials.NewTLS(cfg)
	}
	addr := net.JoinHostPort(g.Host, strconv.Itoa(int(g.Port)))
	c := &grpcChecker{
		// passthrough: the dialer resolves the name on each connection, as
		// kubelet's dial does; an IPv6 zone's '%' must be escaped in the URL.
		target: "passthrough:///" + strings.ReplaceAll(addr, "%", "%25"),
		dialer: o.dialer(false),
		opts: []grpc.DialOption{
			grpc.WithTransportCredentials(creds),
			grpc.WithNoProxy(),
			grpc.WithUserAgent(o.UserAgent),
			grpc.WithMaxHeaderListSize(uint32(o.MaxHeaderBytes)),
			// Wait for the connection until the probe's timeout, as
			// kubelet's blocking dial does, rather than failing at once
			// while the channel is still connecting.
			grpc.WithDefaultCallOptions(grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(maxHealthResponseBytes)),
		},
	}
	if g.Service != nil {
		c.service = *g.Service
	}
	// Refuse now what every check would refuse.
	conn, err := c.open(nil)
	if err != nil {
		return nil, fmt.Errorf("grpc: %w", err)
	}
	_ = conn.Close()
	return c, nil
}

// open creates the check's channel; it dials under g (nothing is dialed
// until the call).
func (c *grpcChecker) open(g *connGuard) (*grpc.ClientConn, error) {
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if g != nil {
			return g.dial(ctx, c.dialer, "tcp", addr)
		}
		return c.dialer.DialContext(ctx, "tcp", addr)
	}
	return grpc.NewClient(c.target, append(c.opts[:len(c.opts):len(c.opts)], grpc.WithContextDialer(dial))...)
}

// Check calls Health/Check for the probe's service within ctx, on a new
// channel. Only SERVING succeeds, with the message "service healthy".
// Failures read, as kubelet's do: `service unhealthy (responded with
// "NOT_SERVING")`, "error: this server does not implement the grpc health
// protocol (grpc.health.v1.Health): <status message>", or "error: health
// rpc failed: <error>" for anything else (unknown service, connection
// failure, deadline). Everything the check opened — the dial, the TLS
// handshake and HTTP/2 preface included — is closed when it returns.
func (c *grpcChecker) Check(ctx context.Context) probe.Outcome {
	start := time.Now()
	gctx, end := context.WithCancel(context.Background())
	defer end()
	res, msg := probe.Failure, ""
	conn, err := c.open(newConnGuard(gctx))
	if err != nil {
		msg = "error: health rpc failed: " + err.Error()
		return probe.Outcome{Result: res, Message: probe.BoundMessage(msg), Latency: time.Since(start)}
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: c.service})
	_ = conn.Close()
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

// Close does nothing: a gRPC probe holds no channel between checks.
func (*grpcChecker) Close() {}
