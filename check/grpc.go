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

// grpcChecker runs a grpc probe: grpc.health.v1.Health/Check. By default
// the checkers of a Set that probe the same address with the same TLS
// settings share one channel (grpcChannels), kept between checks; with
// Options.GRPCDialPerProbe each check opens a channel of its own and
// closes it before it returns, as kubelet dials for every probe.
type grpcChecker struct {
	target  string // passthrough:///host:port
	dialer  *net.Dialer
	opts    []grpc.DialOption
	service string

	channels *grpcChannels // the Set's; nil: a channel per check
	shared   *grpcChannel  // held until Close; nil: a channel per check
}

// newGRPCChecker prepares the channel options of g. It uses TLS when g.TLS
// is set (verified unless g.TLS says otherwise), else plaintext, and dials
// through the shared dialer so that the Policy applies to every connection
// (without SO_LINGER: the connection carries an HTTP/2 exchange and is
// closed by probed, after the answer or when the channel closes). The
// header list a server may send (a status message rides in it) is bounded
// by o.MaxHeaderBytes. A call fails as soon as its channel cannot connect
// (refused, unreachable, a failed TLS handshake), and waits, up to the
// probe's timeout, only while a connection is being established.
func newGRPCChecker(g *probe.GRPC, o *Options, channels *grpcChannels) (*grpcChecker, error) {
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
			// Calls do not wait for ready: a call waits while its channel
			// is connecting and fails with the connection's error once it
			// cannot connect (TRANSIENT_FAILURE), instead of waiting for
			// the probe's timeout.
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxHealthResponseBytes)),
		},
	}
	if g.Service != nil {
		c.service = *g.Service
	}
	if !o.GRPCDialPerProbe {
		ch, err := channels.acquire(grpcChannelKey(c.target, g.TLS), func() (*grpc.ClientConn, error) { return c.open(nil) })
		if err != nil {
			return nil, fmt.Errorf("grpc: %w", err)
		}
		c.channels, c.shared = channels, ch
		return c, nil
	}
	// Refuse now what every check would refuse.
	conn, err := c.open(nil)
	if err != nil {
		return nil, fmt.Errorf("grpc: %w", err)
	}
	_ = conn.Close()
	return c, nil
}

// grpcChannelKey names the channel of target with t's TLS settings: the
// checkers of a Set share a channel exactly when they would build the same
// one (the Set's options are common to all).
func grpcChannelKey(target string, t *probe.TLS) string {
	if t == nil {
		return target
	}
	return fmt.Sprintf("%s\x00tls\x00%t\x00%s\x00%s", target, t.InsecureSkipVerify, t.ServerName, t.CAPEM)
}

// open creates a channel; it dials under g (nothing is dialed until a
// call). A shared channel (g nil) dials under grpc-go's own connect
// deadline, one connection at a time.
func (c *grpcChecker) open(g *connGuard) (*grpc.ClientConn, error) {
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if g != nil {
			return g.dial(ctx, c.dialer, "tcp", addr)
		}
		return c.dialer.DialContext(ctx, "tcp", addr)
	}
	return grpc.NewClient(c.target, append(c.opts[:len(c.opts):len(c.opts)], grpc.WithContextDialer(dial))...)
}

// Check calls Health/Check for the probe's service within ctx, on the
// shared channel or on a new one. Only SERVING succeeds, with the message
// "service healthy". Failures read, as kubelet's do: `service unhealthy
// (responded with "NOT_SERVING")`, "error: this server does not implement
// the grpc health protocol (grpc.health.v1.Health): <status message>", or
// "error: health rpc failed: <error>" for anything else (unknown service,
// connection refused or failed, deadline). With a channel per check,
// everything the check opened — the dial, the TLS handshake and HTTP/2
// preface included — is closed when it returns.
func (c *grpcChecker) Check(ctx context.Context) probe.Outcome {
	start := time.Now()
	req := &healthpb.HealthCheckRequest{Service: c.service}
	var (
		resp *healthpb.HealthCheckResponse
		err  error
	)
	if c.shared != nil {
		var (
			client healthpb.HealthClient
			conn   *grpc.ClientConn
		)
		if client, conn, err = c.channels.client(c.shared); err == nil {
			if resp, err = client.Check(ctx, req); err != nil {
				c.channels.failed(c.shared, conn, err)
			}
		}
	} else {
		resp, err = c.checkOnce(ctx, req)
	}
	res, msg := probe.Failure, ""
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

// checkOnce calls Health/Check on a channel of its own, closed before it
// returns.
func (c *grpcChecker) checkOnce(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	gctx, end := context.WithCancel(context.Background())
	defer end()
	conn, err := c.open(newConnGuard(gctx))
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return healthpb.NewHealthClient(conn).Check(ctx, req)
}

// healthError is the message of a failed Health/Check RPC.
func healthError(err error) string {
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented {
		return "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): " + st.Message()
	}
	return "error: health rpc failed: " + err.Error()
}

// Close releases the shared channel (the last checker holding it closes
// it); with a channel per check it does nothing.
func (c *grpcChecker) Close() {
	if c.shared != nil {
		c.channels.release(c.shared)
		c.shared = nil
	}
}
