package check

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/probed/probed/engine/probe"
)

// tcpChecker runs a tcpSocket probe: connect, then close.
type tcpChecker struct {
	addr   string // host:port
	dialer *net.Dialer
}

// newTCPChecker prepares the probe of s. Like kubelet's ProbeDialer, its
// dialer sets SO_LINGER{on, 1s}, so the many short connections of frequent
// probes do not pile up in TIME_WAIT.
func newTCPChecker(s *probe.TCPSocket, o *Options) *tcpChecker {
	return &tcpChecker{
		addr:   net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port))),
		dialer: o.dialer(true),
	}
}

// Check connects within ctx's deadline and closes the connection at once.
// It succeeds with an empty message when the connection opens; otherwise
// the message is the dial error, e.g. "dial tcp 127.0.0.1:1: connect:
// connection refused".
func (c *tcpChecker) Check(ctx context.Context) probe.Outcome {
	start := time.Now()
	conn, err := c.dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return probe.Outcome{Result: probe.Failure, Message: probe.BoundMessage(err.Error()), Latency: time.Since(start)}
	}
	_ = conn.Close()
	return probe.Outcome{Result: probe.Success, Latency: time.Since(start)}
}

// Close does nothing: a TCP probe holds no connection between checks.
func (*tcpChecker) Close() {}
