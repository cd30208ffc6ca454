package check_test

import (
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
)

// loopback denies every loopback address.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

func TestTCP(t *testing.T) {
	t.Parallel()
	host, port := "127.0.0.1", probedtest.Accepting(t)
	tests := []struct {
		name     string
		opts     check.Options
		sock     probe.TCPSocket
		want     probe.Result
		wantMsg  string
		contains bool
	}{
		{name: "listening", sock: probe.TCPSocket{Host: host, Port: port}, want: probe.Success},
		{name: "closed port", sock: probe.TCPSocket{Host: "127.0.0.1", Port: refused.Port(t)}, want: probe.Failure, wantMsg: "connection refused", contains: true},
		{
			name:    "policy denies the address",
			opts:    check.Options{Policy: &check.Policy{Deny: loopback}},
			sock:    probe.TCPSocket{Host: host, Port: port},
			want:    probe.Failure,
			wantMsg: "dial tcp " + net.JoinHostPort(host, strconv.Itoa(int(port))) + ": address 127.0.0.1 is denied by the target policy (127.0.0.0/8)",
		},
		{
			name:     "policy allows other addresses only",
			opts:     check.Options{Policy: &check.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}},
			sock:     probe.TCPSocket{Host: host, Port: port},
			want:     probe.Failure,
			wantMsg:  "address 127.0.0.1 is not allowed by the target policy",
			contains: true,
		},
		{
			name:     "policy denies the resolved name",
			opts:     check.Options{Policy: &check.Policy{Deny: loopback}},
			sock:     probe.TCPSocket{Host: "localhost", Port: port},
			want:     probe.Failure,
			wantMsg:  "is denied by the target policy",
			contains: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := run(t, open(t, tt.opts, probe.Handler{TCPSocket: &tt.sock}), timeout)
			wantOutcome(t, out, tt.want, tt.wantMsg, tt.contains)
		})
	}
}
