package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		ago  time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{45 * time.Second, "45s"},
		{119 * time.Second, "119s"},
		{3*time.Minute + 20*time.Second, "3m20s"},
		{5 * time.Minute, "5m"},
		{42 * time.Minute, "42m"},
		{5*time.Hour + 7*time.Minute, "5h7m"},
		{30 * time.Hour, "30h"},
		{3*24*time.Hour + 4*time.Hour, "3d4h"},
		{40 * 24 * time.Hour, "40d"},
	}
	for _, tt := range tests {
		if got := age(now, now.Add(-tt.ago)); got != tt.want {
			t.Errorf("age(%v) = %q, want %q", tt.ago, got, tt.want)
		}
	}
	if got := age(now, time.Time{}); got != "<unknown>" {
		t.Errorf("age(zero) = %q, want <unknown>", got)
	}
}

func TestTargetTable(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)
	period := func(d time.Duration) *probev1.Effective { return &probev1.Effective{Period: durationpb.New(d)} }
	targets := []*probev1.Target{
		{Name: "web", Labels: map[string]string{"tier": "front", "app": "shop"}, Status: &probev1.TargetStatus{
			Phase: probev1.Phase_PHASE_ACTIVE, Started: true, Live: false, Ready: true, Revision: 42,
			Readiness: &probev1.ProbeStatus{
				Result: probev1.Result_RESULT_SUCCESS, Effective: period(100 * time.Millisecond),
				LastMessage: "ok", LastProbeTime: timestamppb.New(now.Add(-time.Second)),
			},
			Liveness: &probev1.ProbeStatus{
				Result: probev1.Result_RESULT_FAILURE, Effective: period(1500 * time.Millisecond),
				LastMessage: "HTTP probe failed with statuscode: 500", LastProbeTime: timestamppb.New(now.Add(-2 * time.Second)),
			},
			CreateTime: timestamppb.New(now.Add(-90 * time.Second)),
		}},
		{Name: "db", Status: &probev1.TargetStatus{
			Phase: probev1.Phase_PHASE_ACTIVE, Started: true, Live: true, Ready: true, Revision: 7,
			Readiness: &probev1.ProbeStatus{
				Result: probev1.Result_RESULT_SUCCESS, Effective: period(time.Second),
				LastMessage: "accepting connections", LastProbeTime: timestamppb.New(now.Add(-time.Second)),
			},
			CreateTime: timestamppb.New(now.Add(-5 * time.Minute)),
		}},
		{Name: "going-away", Status: &probev1.TargetStatus{
			Phase: probev1.Phase_PHASE_TERMINATING, Started: true,
			CreateTime: timestamppb.New(now.Add(-3 * time.Hour)),
		}},
	}
	// In a cluster, each target's status names the replica that probes it.
	clustered := make([]*probev1.Target, 0, len(targets))
	for i, t := range targets[:2] {
		c := proto.CloneOf(t)
		c.Status.Replica = []string{"r1", ""}[i]
		clustered = append(clustered, c)
	}
	tests := []struct {
		name    string
		targets []*probev1.Target
		wide    bool
		want    string
	}{
		{
			name: "table: the message of the probe that fails",
			want: "" +
				"NAME         PHASE         STARTED   LIVE    READY   STARTUP   LIVENESS       READINESS       AGE   MESSAGE\n" +
				"web          Active        true      false   true    -         failure/1.5s   success/100ms   90s   HTTP probe failed with statuscode: 500\n" +
				"db           Active        true      true    true    -         -              success/1s      5m    -\n" +
				"going-away   Terminating   true      false   false   -         -              -               3h    -\n",
		},
		{
			name: "wide: labels, revision, and the last message of a passing probe",
			wide: true,
			want: "" +
				"NAME         PHASE         STARTED   LIVE    READY   STARTUP   LIVENESS       READINESS       AGE   LABELS                REVISION   MESSAGE\n" +
				"web          Active        true      false   true    -         failure/1.5s   success/100ms   90s   app=shop,tier=front   42         liveness: HTTP probe failed with statuscode: 500\n" +
				"db           Active        true      true    true    -         -              success/1s      5m    -                     7          readiness: accepting connections\n" +
				"going-away   Terminating   true      false   false   -         -              -               3h    -                     0          -\n",
		},
		{
			name:    "wide in a cluster: the replica that probes each target",
			targets: clustered,
			wide:    true,
			want: "" +
				"NAME   PHASE    STARTED   LIVE    READY   STARTUP   LIVENESS       READINESS       AGE   LABELS                REVISION   REPLICA   MESSAGE\n" +
				"web    Active   true      false   true    -         failure/1.5s   success/100ms   90s   app=shop,tier=front   42         r1        liveness: HTTP probe failed with statuscode: 500\n" +
				"db     Active   true      true    true    -         -              success/1s      5m    -                     7          -         readiness: accepting connections\n",
		},
		{
			name:    "table in a cluster: no replica column",
			targets: clustered[:1],
			want: "" +
				"NAME   PHASE    STARTED   LIVE    READY   STARTUP   LIVENESS       READINESS       AGE   MESSAGE\n" +
				"web    Active   true      false   true    -         failure/1.5s   success/100ms   90s   HTTP probe failed with statuscode: 500\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := targets
			if tt.targets != nil {
				in = tt.targets
			}
			var b strings.Builder
			if err := printTargetTable(&b, now, in, tt.wide); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNotReady(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		st   *probev1.TargetStatus
		want string
	}{
		{"readiness failing", &probev1.TargetStatus{Started: true, Live: true, Readiness: &probev1.ProbeStatus{
			Result: probev1.Result_RESULT_FAILURE, ConsecutiveFailures: 3, LastProbeTime: timestamppb.New(now.Add(-200 * time.Millisecond)),
			LastMessage: "HTTP probe failed with statuscode: 404",
		}}, "readiness probe: failure (3 failures in a row, last 200ms ago): HTTP probe failed with statuscode: 404"},
		{"startup not passed", &probev1.TargetStatus{Live: true, Startup: &probev1.ProbeStatus{
			Result: probev1.Result_RESULT_UNKNOWN, ConsecutiveFailures: 1, LastProbeTime: timestamppb.New(now.Add(-3 * time.Second)),
			LastMessage: "dial tcp 10.0.0.1:80: i/o timeout",
		}, Readiness: &probev1.ProbeStatus{Result: probev1.Result_RESULT_FAILURE}}, "startup probe: unknown (1 failure in a row, last 3s ago): dial tcp 10.0.0.1:80: i/o timeout"},
		{"not run yet", &probev1.TargetStatus{Started: true, Readiness: &probev1.ProbeStatus{
			Result: probev1.Result_RESULT_FAILURE, Effective: &probev1.Effective{InitialDelay: durationpb.New(time.Minute)},
		}}, "its readiness probe has not run yet (initial delay 1m0s)"},
		{"terminating", &probev1.TargetStatus{Phase: probev1.Phase_PHASE_TERMINATING}, "it is terminating"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := notReady(&probev1.Target{Name: "x", Status: tt.st}, now); got != tt.want {
				t.Errorf("notReady = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEventCells(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 10, 12, 0, 0, 123456789, time.UTC)
	tests := []struct {
		name string
		ev   *probev1.Event
		want []string
	}{
		{"transition", &probev1.Event{
			Revision: 42, Time: timestamppb.New(at), Name: "web", Kind: probev1.EventKind_EVENT_KIND_TRANSITION,
			ProbeType: probev1.ProbeType_PROBE_TYPE_READINESS, From: probev1.Result_RESULT_FAILURE, To: probev1.Result_RESULT_SUCCESS,
			Ready: true, Message: "HTTP 200\n\tOK",
		}, []string{"42", "2025-01-10T12:00:00.123Z", "web", "transition", "readiness", "failure→success", "true", "HTTP 200 OK"}},
		{"reason when no message", &probev1.Event{
			Revision: 7, Time: timestamppb.New(at), Name: "db", Kind: probev1.EventKind_EVENT_KIND_RESET, Reason: "Reset",
		}, []string{"7", "2025-01-10T12:00:00.123Z", "db", "reset", "-", "-", "false", "Reset"}},
		{"a probe's reason says nothing", &probev1.Event{
			Revision: 8, Time: timestamppb.New(at), Name: "db", Kind: probev1.EventKind_EVENT_KIND_TRANSITION, Reason: "Probe",
			ProbeType: probev1.ProbeType_PROBE_TYPE_READINESS, From: probev1.Result_RESULT_FAILURE, To: probev1.Result_RESULT_SUCCESS, Ready: true,
		}, []string{"8", "2025-01-10T12:00:00.123Z", "db", "transition", "readiness", "failure→success", "true", "-"}},
		{"snapshot", &probev1.Event{Revision: 3, Name: "db", Kind: probev1.EventKind_EVENT_KIND_SNAPSHOT, Ready: true},
			[]string{"3", "-", "db", "snapshot", "-", "-", "true", "-"}},
		{"long message", &probev1.Event{Revision: 1, Name: "x", Kind: probev1.EventKind_EVENT_KIND_CREATED, Message: strings.Repeat("é", 150)},
			[]string{"1", "-", "x", "created", "-", "-", "false", strings.Repeat("é", maxMessage-1) + "…"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, eventCells(tt.ev)); diff != "" {
			t.Errorf("%s: cells (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestLatencyText(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		412345 * time.Nanosecond:  "412µs",
		3530762 * time.Nanosecond: "3.53ms",
		1234567890:                "1.235s",
	} {
		if got := latencyText(d); got != want {
			t.Errorf("latencyText(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestMarshalJSONIsStable(t *testing.T) {
	t.Parallel()
	ev := &probev1.Event{Revision: 9, Name: "web", Kind: probev1.EventKind_EVENT_KIND_CREATED, Target: &probev1.Target{
		Name: "web", Labels: map[string]string{"b": "2", "a": "1"},
	}}
	line, err := marshalJSON(ev, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"revision":"9","name":"web","kind":"EVENT_KIND_CREATED","target":{"name":"web","labels":{"a":"1","b":"2"}}}`
	if string(line) != want {
		t.Errorf("compact = %s, want %s", line, want)
	}
	indented, err := marshalJSON(ev.GetTarget(), true)
	if err != nil {
		t.Fatal(err)
	}
	wantIndented := "{\n  \"name\": \"web\",\n  \"labels\": {\n    \"a\": \"1\",\n    \"b\": \"2\"\n  }\n}"
	if string(indented) != wantIndented {
		t.Errorf("indented = %s, want %s", indented, wantIndented)
	}
}
