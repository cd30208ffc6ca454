package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func ptr[T any](v T) *T { return &v }

func api(s *probedtest.Server) probev1.ProbeServiceClient {
	return probev1.NewProbeServiceClient(s.Conn)
}

func hostPort(t *testing.T, addr string) (string, int32) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}

// fast returns a probe with a 100ms period, the given timeout and
// threshold 1, so results show within a few hundred milliseconds.
func fast(timeoutMs int32) *probev1.Probe {
	return &probev1.Probe{PeriodSeconds: 1, PeriodMilliseconds: ptr[int32](-900), TimeoutMilliseconds: ptr(timeoutMs - 1000), FailureThreshold: 1}
}

// waitFor polls GetTarget until cond holds (or 10s pass).
func waitFor(t *testing.T, c probev1.ProbeServiceClient, name string, cond func(*probev1.Target) bool) *probev1.Target {
	t.Helper()
	var last *probev1.Target
	poll.UntilMet(t, "target "+name+" in the expected state", 10*time.Second, func() string {
		resp, err := c.GetTarget(context.Background(), &probev1.GetTargetRequest{Name: name})
		if err != nil {
			t.Fatalf("GetTarget(%s): %v", name, err)
		}
		last = resp.GetTarget()
		if cond(last) {
			return ""
		}
		return fmt.Sprintf("target %s never reached the expected state; last status %v", name, last.GetStatus())
	})
	return last
}

// TestEveryCheckerOverTheAPI registers targets of every handler against
// real servers on loopback — healthy, failing, hanging and closed — through
// the gRPC API, and reads the results back from it.
func TestEveryCheckerOverTheAPI(t *testing.T) {
	s := probedtest.Start(t, probedtest.Options{Checks: check.Options{AllowExec: true}})
	c := api(s)

	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("K-Network-Probe") == "queue" {
			io.WriteString(w, "queue")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer ok.Close()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	g := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("up", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(g, hs)
	gl, _ := net.Listen("tcp", "127.0.0.1:0")
	go g.Serve(gl)
	defer g.Stop()

	okHost, okPort := hostPort(t, ok.Listener.Addr().String())
	hangHost, hangPort := hostPort(t, hang.Listener.Addr().String())
	tcpHost, tcpPort := hostPort(t, tcp.Addr().String())
	closedHost, closedPort := "127.0.0.1", refused.Port(t)
	gHost, gPort := hostPort(t, gl.Addr().String())

	with := func(p *probev1.Probe, set func(*probev1.Probe)) *probev1.Probe { set(p); return p }
	tests := []struct {
		name    string
		probe   *probev1.Probe
		ready   bool
		message string
	}{
		{"http knative probe", with(fast(500), func(p *probev1.Probe) {
			p.Handler = &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: okHost, Port: okPort, Path: "/healthz",
				HttpHeaders: []*probev1.HTTPHeader{{Name: "K-Network-Probe", Value: "queue"}}, ExpectedBody: "queue"}}
		}), true, "HTTP 200, 5 bytes"},
		{"http 503", with(fast(500), func(p *probev1.Probe) {
			p.Handler = &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: okHost, Port: okPort}}
		}), false, "HTTP probe failed with statuscode: 503"},
		{"http hanging", with(fast(200), func(p *probev1.Probe) {
			p.Handler = &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: hangHost, Port: hangPort}}
		}), false, "probe timed out after 200ms"},
		{"tcp open", with(fast(500), func(p *probev1.Probe) {
			p.Handler = &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: tcpHost, Port: tcpPort}}
		}), true, ""},
		{"tcp closed port", with(fast(500), func(p *probev1.Probe) {
			p.Handler = &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: closedHost, Port: closedPort}}
		}), false, "connection refused"},
		{"grpc serving", with(fast(500), func(p *probev1.Probe) {
			p.Handler = &probev1.Probe_Grpc{Grpc: &probev1.GRPCAction{Host: gHost, Port: gPort, Service: ptr("up")}}
		}), true, ""},
		{"grpc not serving", with(fast(500), func(p *probev1.Probe) {
			p.Handler = &probev1.Probe_Grpc{Grpc: &probev1.GRPCAction{Host: gHost, Port: gPort, Service: ptr("down")}}
		}), false, `service unhealthy (responded with "NOT_SERVING")`},
		{"exec true", with(fast(900), func(p *probev1.Probe) {
			p.Handler = &probev1.Probe_Exec{Exec: &probev1.ExecAction{Command: []string{"sh", "-c", "echo fine"}}}
		}), true, "fine"},
		{"exec false", with(fast(900), func(p *probev1.Probe) {
			p.Handler = &probev1.Probe_Exec{Exec: &probev1.ExecAction{Command: []string{"sh", "-c", "echo broken; exit 3"}}}
		}), false, "command exited with status 3: broken"},
	}
	for i, tt := range tests {
		name := "t" + strconv.Itoa(i)
		if _, err := c.CreateTarget(context.Background(), &probev1.CreateTargetRequest{Target: &probev1.Target{Name: name, ReadinessProbe: tt.probe}}); err != nil {
			t.Fatalf("%s: CreateTarget: %v", tt.name, err)
		}
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := waitFor(t, c, "t"+strconv.Itoa(i), func(tg *probev1.Target) bool {
				return tg.GetStatus().GetReadiness().GetProbesTotal() >= 2
			})
			st := got.GetStatus()
			if st.GetReady() != tt.ready || !strings.Contains(st.GetReadiness().GetLastMessage(), tt.message) {
				t.Errorf("ready %v, message %q; want ready %v and a message containing %q",
					st.GetReady(), st.GetReadiness().GetLastMessage(), tt.ready, tt.message)
			}
		})
	}
}

func TestInvalidTargetCarriesEveryViolation(t *testing.T) {
	s := probedtest.Start(t, probedtest.Options{})
	_, err := api(s).CreateTarget(context.Background(), &probev1.CreateTargetRequest{Target: &probev1.Target{
		Name: "Bad_Name",
		ReadinessProbe: &probev1.Probe{
			Handler:            &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: 1}},
			PeriodMilliseconds: ptr[int32](1000),
		},
		Lifecycle: &probev1.Lifecycle{PreStop: &probev1.LifecycleHandler{Action: &probev1.LifecycleHandler_Sleep{Sleep: &probev1.SleepAction{Seconds: 31}}}},
	}})
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("code = %v, want InvalidArgument", st.Code())
	}
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	want := []string{"target.name", "target.readinessProbe.periodMilliseconds", "target.lifecycle.preStop.sleep.seconds"}
	if strings.Join(fields, ",") != strings.Join(want, ",") {
		t.Errorf("violations at %v, want %v", fields, want)
	}
	for _, tt := range []struct {
		name string
		call func() error
		code codes.Code
	}{
		{"get without name", func() error {
			_, err := api(s).GetTarget(context.Background(), &probev1.GetTargetRequest{})
			return err
		}, codes.InvalidArgument},
		{"get unknown", func() error {
			_, err := api(s).GetTarget(context.Background(), &probev1.GetTargetRequest{Name: "nope"})
			return err
		}, codes.NotFound},
		{"create without target", func() error {
			_, err := api(s).CreateTarget(context.Background(), &probev1.CreateTargetRequest{})
			return err
		}, codes.InvalidArgument},
		{"trigger without type", func() error {
			_, err := api(s).TriggerProbe(context.Background(), &probev1.TriggerProbeRequest{Name: "x"})
			return err
		}, codes.InvalidArgument},
		{"delete with a negative grace period", func() error {
			_, err := api(s).DeleteTarget(context.Background(), &probev1.DeleteTargetRequest{Name: "x", GracePeriodSeconds: ptr[int64](-1)})
			return err
		}, codes.InvalidArgument},
		{"get with a name too long to exist", func() error {
			_, err := api(s).GetTarget(context.Background(), &probev1.GetTargetRequest{Name: strings.Repeat("n", 1<<20)})
			return err
		}, codes.InvalidArgument},
		{"list with a bad token", func() error {
			_, err := api(s).ListTargets(context.Background(), &probev1.ListTargetsRequest{PageToken: "!!"})
			return err
		}, codes.InvalidArgument},
		{"watch with a bad kind", func() error {
			st, err := api(s).Watch(context.Background(), &probev1.WatchRequest{Kinds: []probev1.EventKind{probev1.EventKind_EVENT_KIND_UNSPECIFIED}})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}, codes.InvalidArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(tt.call()); got != tt.code {
				t.Errorf("code = %v, want %v", got, tt.code)
			}
		})
	}
}

func TestListPages(t *testing.T) {
	s := probedtest.Start(t, probedtest.Options{})
	c := api(s)
	for i := range 25 {
		labels := map[string]string{"parity": []string{"even", "odd"}[i%2]}
		if _, err := c.CreateTarget(context.Background(), &probev1.CreateTargetRequest{Target: &probev1.Target{Name: "t" + strconv.Itoa(100+i), Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	token := ""
	for {
		resp, err := c.ListTargets(context.Background(), &probev1.ListTargetsRequest{PageSize: 4, PageToken: token, LabelSelector: map[string]string{"parity": "odd"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range resp.GetTargets() {
			names = append(names, tg.GetName())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(names) != 12 || names[0] != "t101" || names[11] != "t123" {
		t.Errorf("odd targets over pages of 4 = %v, want t101, t103 … t123", names)
	}
}

func TestWatchProgressNotifyAndCompaction(t *testing.T) {
	clock := clockwork.NewFakeClock()
	s := probedtest.Start(t, probedtest.Options{Clock: clock, Engine: engine.Options{History: 3}})
	c := api(s)
	for i := range 5 {
		if _, err := c.CreateTarget(context.Background(), &probev1.CreateTargetRequest{Target: &probev1.Target{Name: "t" + strconv.Itoa(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	rev := s.Engine.Revision()

	// Compacted: OutOfRange naming the oldest retained revision.
	st, err := c.Watch(context.Background(), &probev1.WatchRequest{SinceRevision: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	if status.Code(err) != codes.OutOfRange || !strings.Contains(status.Convert(err).Message(), "oldest retained revision is 3") {
		t.Fatalf("watch from a compacted revision: %v, want OutOfRange naming revision 3", err)
	}

	// Idle: a progress notification with the current revision once the
	// progress interval passes on the server's clock.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err = c.Watch(ctx, &probev1.WatchRequest{SinceRevision: rev + 1})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *probev1.WatchResponse, 1)
	go func() {
		resp, err := st.Recv()
		if err == nil {
			got <- resp
		}
	}()
	// Wait until the server's Watch is waiting on its progress timer.
	bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer bcancel()
	poll.Until(t, "the server's Watch registered", 10*time.Second, func() bool { return s.Engine.Stats().Watchers > 0 })
	if err := clock.BlockUntilContext(bctx, 4); err != nil { // wheel, compaction ticker, pool resize ticker, progress timer
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	select {
	case resp := <-got:
		if !resp.GetProgressNotify() || resp.GetRevision() != rev || len(resp.GetEvents()) != 0 {
			t.Fatalf("got %v, want a progress notification at revision %d", resp, rev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification after the interval")
	}
}

func TestWatchEndsUnavailableOnShutdown(t *testing.T) {
	s := probedtest.Start(t, probedtest.Options{})
	conn, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := probev1.NewProbeServiceClient(conn).Watch(context.Background(), &probev1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := st.Recv(); err != nil || !resp.GetSnapshotComplete() {
		t.Fatalf("first message = %v, %v; want the (empty) complete snapshot", resp, err)
	}
	go s.Stop()
	for {
		_, err := st.Recv()
		if err != nil {
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("stream ended with %v, want Unavailable", err)
			}
			return
		}
	}
}
