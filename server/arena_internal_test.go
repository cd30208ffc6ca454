package server

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestArenaConvertsAsAlone: targets converted from one arena whose chunks
// fill up several times are equal to the same targets converted one
// message at a time, and stay equal once later targets were converted
// (a new chunk never moves the messages already handed out).
func TestArenaConvertsAsAlone(t *testing.T) {
	svc := "db"
	ms := func(v int32) *int32 { return &v }
	at := time.Date(2026, 11, 29, 2, 0, 0, 123456789, time.UTC)
	specs := []*probev1.Target{
		{Name: "web", Labels: map[string]string{"app": "demo"}, ReadinessProbe: &probev1.Probe{
			Handler:       &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: 8080, Path: "/healthz", Scheme: probev1.Scheme_SCHEME_HTTPS, Tls: &probev1.TLSConfig{ServerName: "web"}, HttpHeaders: []*probev1.HTTPHeader{{Name: "X-A", Value: "b"}}}},
			PeriodSeconds: 1, PeriodMilliseconds: ms(-900),
		}},
		{Name: "db", StartupProbe: &probev1.Probe{
			Handler: &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "db", Port: 5432}},
		}, LivenessProbe: &probev1.Probe{
			Handler: &probev1.Probe_Grpc{Grpc: &probev1.GRPCAction{Host: "db", Port: 9090, Service: &svc}},
		}, ReadinessProbe: &probev1.Probe{
			Handler: &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "db", Port: 5433}},
		}},
		{Name: "exec", LivenessProbe: &probev1.Probe{Handler: &probev1.Probe_Exec{Exec: &probev1.ExecAction{Command: []string{"true"}}}}},
		{Name: "drain", TerminationGracePeriodSeconds: ms64(5), Lifecycle: &probev1.Lifecycle{PreStop: &probev1.LifecycleHandler{
			Action: &probev1.LifecycleHandler_Sleep{Sleep: &probev1.SleepAction{Seconds: 0}},
		}}},
	}
	var targets []*engine.Target
	for round := range 5 {
		for i, s := range specs {
			spec := toSpec(s)
			spec.Name = fmt.Sprintf("%s-%d", spec.Name, round)
			st := engine.Status{Phase: engine.Active, CreateTime: at, StartTime: at.Add(time.Second), Revision: uint64(round*10 + i), Owner: "set"}
			if round%2 == 1 {
				st.Phase, st.DeleteTime = engine.Terminating, at.Add(time.Minute)
			}
			for typ := range probe.NumTypes {
				if spec.Probe(probe.Type(typ)) == nil {
					continue
				}
				st.Probes[typ] = engine.ProbeStatus{
					Present: true, Result: probe.Success, HasInitialized: true, LastTransitionTime: at.Add(2 * time.Second),
					ConsecutiveSuccesses: int32(round + 1), LastProbeTime: at.Add(3 * time.Second), LastMessage: "ok",
					LastLatency: time.Duration(round+1) * 1500 * time.Microsecond, ProbesTotal: uint64(round + 7),
				}
			}
			targets = append(targets, &engine.Target{Spec: spec, Status: st})
		}
	}
	a := newArena(3) // chunks of 3: every kind of message fills several
	var got []*probev1.Target
	for _, tg := range targets {
		got = append(got, fromTarget(a, tg))
	}
	for i, tg := range targets {
		want := fromTarget(nil, tg)
		if !proto.Equal(got[i], want) {
			t.Errorf("%s from the arena:\n%v\nwant\n%v", tg.Spec.Name, got[i], want)
		}
	}
	if got[1].GetStatus().GetCreateTime().AsTime() != at || got[1].GetStatus().GetLiveness().GetLastLatency().AsDuration() != 1500*time.Microsecond {
		t.Errorf("times converted wrong: %v", got[1].GetStatus())
	}
}
