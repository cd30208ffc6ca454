package check

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/probe"
)

// FuzzValidSpecRuns: whatever probe spec validation accepts, the checkers
// can run: Open succeeds, an HTTP probe's request can be written (its
// path and headers make a valid request line and header), an exec probe's
// arguments can be passed to a program, and a literal address is not one
// the dialer refuses outright (unspecified). Bad input is refused at
// create time with a field error, never left to fail on every probe
// (issue 14, item 8).
func FuzzValidSpecRuns(f *testing.F) {
	for _, seed := range []string{
		`{"handler":{"httpGet":{"host":"127.0.0.1","port":8080,"path":"/healthz?x=1"}}}`,
		`{"handler":{"httpGet":{"host":"127.0.0.1:8080","port":80}}}`,
		`{"handler":{"httpGet":{"host":"h","port":80,"path":"/%zz"}}}`,
		`{"handler":{"httpGet":{"host":"h","port":80,"path":"/a\r\nX: y"}}}`,
		`{"handler":{"httpGet":{"host":"fe80::1%eth0","port":80,"httpHeaders":[{"name":"X","value":"a\u001bb"}]}}}`,
		`{"handler":{"httpGet":{"host":"h","port":443,"scheme":"HTTPS","tls":{"serverName":"a b"}}}}`,
		`{"handler":{"tcpSocket":{"host":":","port":1}}}`,
		`{"handler":{"tcpSocket":{"host":"::1%","port":1}}}`,
		`{"handler":{"tcpSocket":{"host":"::ffff:0.0.0.0","port":1}}}`,
		`{"handler":{"grpc":{"host":"0.0.0.0","port":1,"service":"x"}}}`,
		`{"handler":{"grpc":{"host":"a..b","port":1}}}`,
		`{"handler":{"exec":{"command":["true","a\u0000b"]}}}`,
	} {
		f.Add([]byte(seed))
	}
	opts := probe.Options{MinPeriod: 100 * time.Millisecond, MinTimeout: 100 * time.Millisecond, SubSecondProbes: true, AllowExec: true}
	set := New(Options{AllowExec: true})
	f.Fuzz(func(t *testing.T, data []byte) {
		var s probe.Spec
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		if errs := s.Validate(probe.Readiness, field.NewPath("p"), opts); len(errs) > 0 {
			return
		}
		c, err := set.Open("t", probe.Readiness, s.Handler)
		if err != nil {
			t.Fatalf("a valid spec does not open: %v\n%s", err, data)
		}
		defer c.Close()
		h := &s.Handler
		switch {
		case h.HTTPGet != nil:
			hc := c.(*httpChecker)
			req, err := http.NewRequest(http.MethodGet, hc.target.String(), nil)
			if err != nil {
				t.Fatalf("a valid spec makes no request: %v\n%s", err, data)
			}
			req.Header = hc.header()
			req.Host = hc.host
			if err := req.Write(&bytes.Buffer{}); err != nil {
				t.Fatalf("a valid spec's request cannot be written: %v\n%s", err, data)
			}
			if got := req.URL.Hostname(); !strings.EqualFold(got, h.HTTPGet.Host) {
				t.Fatalf("the request goes to %q, not the spec's host %q", got, h.HTTPGet.Host)
			}
			checkLiteral(t, h.HTTPGet.Host, h.HTTPGet.Port)
		case h.TCPSocket != nil:
			checkLiteral(t, h.TCPSocket.Host, h.TCPSocket.Port)
		case h.GRPC != nil:
			checkLiteral(t, h.GRPC.Host, h.GRPC.Port)
		case h.Exec != nil:
			if slices.ContainsFunc(h.Exec.Command, func(a string) bool { return strings.ContainsRune(a, 0) }) {
				t.Fatalf("a valid exec command holds a NUL: %q", h.Exec.Command)
			}
		}
	})
}

// checkLiteral fails t when host is an IP address the dialer refuses
// whatever the policy: validation should have.
func checkLiteral(t *testing.T, host string, port int32) {
	t.Helper()
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return
	}
	if err := checkAddress(nil, net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))); err != nil {
		t.Fatalf("a valid host %q is refused at dial time: %v", host, err)
	}
}
