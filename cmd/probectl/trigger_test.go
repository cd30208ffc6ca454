package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestTriggerCommand(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	b := probedtest.NewBackend(t, false)
	mustCreate(t, c, b.Readiness("web"))

	r := probectl(ctx, s.Addr, "", "trigger", "web", "--probe", "readiness")
	if r.code != 0 {
		t.Fatalf("code %d, stderr %q", r.code, r.err)
	}
	rows := tableRows(r.out)
	if len(rows) != 2 || len(rows[1]) < 5 {
		t.Fatalf("table = %q, want a header and one row", r.out)
	}
	if diff := cmp.Diff([]string{"PROBE", "OUTCOME", "LATENCY", "RESULT", "MESSAGE"}, rows[0]); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	if rows[1][0] != "readiness" || rows[1][1] != "failure" {
		t.Errorf("row = %v, want readiness failure", rows[1])
	}

	b.SetHealthy(true)
	r = probectl(ctx, s.Addr, "", "-o", "json", "trigger", "web", "--probe", "READINESS")
	var resp probev1.TriggerProbeResponse
	if r.code != 0 || unmarshalJSON(r.out, &resp) != nil {
		t.Fatalf("json: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	if resp.GetOutcome().GetResult() != probev1.Result_RESULT_SUCCESS {
		t.Errorf("outcome = %v, want RESULT_SUCCESS", resp.GetOutcome())
	}

	r = probectl(ctx, s.Addr, "", "trigger", "web", "--probe", "startup")
	if r.code != 1 || r.err != "Error: target \"web\" has no startup probe: not found\n" {
		t.Errorf("trigger absent probe: code %d, stderr %q", r.code, r.err)
	}
}

// TestPrintTriggerWithoutOutcome: a caller who may operate a target but
// not read it gets no outcome; probectl says the probe ran.
func TestPrintTriggerWithoutOutcome(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	if err := printTrigger(cmd, probev1.ProbeType_PROBE_TYPE_READINESS, &probev1.TriggerProbeResponse{}); err != nil {
		t.Fatal(err)
	}
	if want := "readiness probe triggered (its outcome is shown only to callers who may read the target)\n"; out.String() != want {
		t.Errorf("printTrigger(no outcome) = %q, want %q", out.String(), want)
	}
}

func TestTriggerDefaultProbe(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	b := probedtest.NewBackend(t, true)
	tcp := func() *probev1.Probe {
		return &probev1.Probe{Handler: &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: b.Port()}}}
	}
	mustCreate(t, c, &probev1.Target{Name: "both", LivenessProbe: tcp(), ReadinessProbe: tcp()})
	mustCreate(t, c, &probev1.Target{Name: "alive", LivenessProbe: tcp()})
	mustCreate(t, c, &probev1.Target{Name: "no-readiness", StartupProbe: tcp(), LivenessProbe: tcp()})
	mustCreate(t, c, &probev1.Target{Name: "none"})

	tests := []struct {
		name, target string
		probe        string // in the table
		wantErr      string
	}{
		{"readiness when there is one", "both", "readiness", ""},
		{"the only probe", "alive", "liveness", ""},
		{"ambiguous", "no-readiness", "", `Error: target "no-readiness" has startup and liveness probes and no readiness probe: choose one with --probe` + "\n"},
		{"no probe", "none", "", `Error: target "none" has no probe to trigger` + "\n"},
		{"unknown target", "ghost", "", `Error: target "ghost": not found` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := probectl(ctx, s.Addr, "", "trigger", tt.target)
			if tt.wantErr != "" {
				if r.code != 1 || r.err != tt.wantErr {
					t.Errorf("code %d, stderr %q; want 1, %q", r.code, r.err, tt.wantErr)
				}
				return
			}
			rows := tableRows(r.out)
			if r.code != 0 || len(rows) != 2 || rows[1][0] != tt.probe || rows[1][1] != "success" {
				t.Errorf("code %d, stdout %q, stderr %q; want %s run with success", r.code, r.out, r.err, tt.probe)
			}
		})
	}
}
