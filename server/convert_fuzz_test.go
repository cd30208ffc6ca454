package server

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/feature"
	"github.com/probed/probed/engine/target"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// FuzzConvert feeds wire bytes as a client could send them: whatever
// decodes as a probev1.Target converts to a spec (toSpec), validates, and
// converts back (fromTarget) without panicking; every validation error is
// at a field under "target"; and a valid spec survives the round trip
// spec → API → wire → API → spec unchanged.
func FuzzConvert(f *testing.F) {
	ms := func(v int32) *int32 { return &v }
	svc := "db"
	for _, seed := range []*probev1.Target{
		{Name: "web", Labels: map[string]string{"app": "demo"}, ReadinessProbe: &probev1.Probe{
			Handler:       &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: 8080, Path: "/healthz", Scheme: probev1.Scheme_SCHEME_HTTPS, Tls: &probev1.TLSConfig{ServerName: "web", InsecureSkipVerify: true}, HttpHeaders: []*probev1.HTTPHeader{{Name: "X-A", Value: "b"}}, ExpectedBody: "ok", DisableKeepAlive: true}},
			PeriodSeconds: 1, PeriodMilliseconds: ms(-900), InitialPeriodMilliseconds: ms(200), InitialPeriodSeconds: ms(0),
		}},
		{Name: "db", StartupProbe: &probev1.Probe{
			Handler:                        &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "db", Port: 5432}},
			InitializationFailureThreshold: ms(30), FailureThreshold: 3, TimeoutMilliseconds: ms(500),
		}, LivenessProbe: &probev1.Probe{
			Handler: &probev1.Probe_Grpc{Grpc: &probev1.GRPCAction{Host: "db", Port: 9090, Service: &svc}},
		}},
		{Name: "exec", LivenessProbe: &probev1.Probe{Handler: &probev1.Probe_Exec{Exec: &probev1.ExecAction{Command: []string{"true"}}}}},
		{Name: "drain", TerminationGracePeriodSeconds: ms64(5), Lifecycle: &probev1.Lifecycle{PreStop: &probev1.LifecycleHandler{
			Action: &probev1.LifecycleHandler_Sleep{Sleep: &probev1.SleepAction{Seconds: 0}},
		}}},
		{Name: "empty-lifecycle", Lifecycle: &probev1.Lifecycle{PreStop: &probev1.LifecycleHandler{}}},
		{Name: "no-handler", ReadinessProbe: &probev1.Probe{}, Status: &probev1.TargetStatus{Ready: true}},
		{Name: "bad-scheme", ReadinessProbe: &probev1.Probe{Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "h", Port: 1, Scheme: 7}}}},
	} {
		b, err := proto.Marshal(seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	opts := target.Options{Gates: feature.Gates{}, MinPeriod: 100 * time.Millisecond, MinTimeout: 100 * time.Millisecond, AllowExec: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		var in probev1.Target
		if err := proto.Unmarshal(data, &in); err != nil {
			return
		}
		spec := toSpec(&in)
		errs := target.Validate(spec, nil, opts)
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "target.") {
				t.Fatalf("error %q is not at a field under target", e.Error())
			}
		}
		out := fromTarget(nil, &engine.Target{Spec: spec})
		if len(errs) > 0 {
			return
		}
		out.Status = nil
		wire, err := proto.Marshal(out)
		if err != nil {
			t.Fatalf("a valid target does not marshal: %v", err)
		}
		var back probev1.Target
		if err := proto.Unmarshal(wire, &back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(spec, toSpec(&back)); diff != "" {
			t.Fatalf("round trip changed a valid spec (-before +after):\n%s", diff)
		}
	})
}

func ms64(v int64) *int64 { return &v }
