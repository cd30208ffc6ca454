package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestListCommand(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	for _, tg := range []*probev1.Target{
		{Name: "c", Labels: map[string]string{"team": "x"}},
		{Name: "a", Labels: map[string]string{"team": "x", "tier": "db"}},
		{Name: "b", Labels: map[string]string{"team": "y"}},
	} {
		mustCreate(t, c, tg)
	}

	tests := []struct {
		name  string
		args  []string
		names []string
	}{
		{"all", nil, []string{"a", "b", "c"}},
		{"one label", []string{"-l", "team=x"}, []string{"a", "c"}},
		{"two labels", []string{"-l", "team=x,tier=db"}, []string{"a"}},
		{"none", []string{"-l", "team=z"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := probectl(ctx, s.Addr, "", append([]string{"list"}, tt.args...)...)
			if r.code != 0 {
				t.Fatalf("code %d, stderr %q", r.code, r.err)
			}
			rows := tableRows(r.out)
			var names []string
			for _, row := range rows[1:] {
				names = append(names, row[0])
				if diff := cmp.Diff([]string{"Active", "true", "true", "true", "-", "-", "-"}, row[1:8]); diff != "" || row[9] != "-" {
					t.Errorf("row %s (-want +got):\n%s", row[0], diff)
				}
			}
			if diff := cmp.Diff(tt.names, names); diff != "" {
				t.Errorf("listed names (-want +got):\n%s", diff)
			}

			r = probectl(ctx, s.Addr, "", append([]string{"list", "-o", "json"}, tt.args...)...)
			var resp probev1.ListTargetsResponse
			if r.code != 0 || unmarshalJSON(r.out, &resp) != nil {
				t.Fatalf("json: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
			}
			names = nil
			for _, tg := range resp.GetTargets() {
				names = append(names, tg.GetName())
			}
			if diff := cmp.Diff(tt.names, names); diff != "" {
				t.Errorf("json names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSelector(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{"", nil, false},
		{"a=1", map[string]string{"a": "1"}, false},
		{"a=1, b=", map[string]string{"a": "1", "b": ""}, false},
		{"a", nil, true},
		{"=1", nil, true},
		{"a=1,a=2", nil, true},
	}
	for _, tt := range tests {
		got, err := parseSelector(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseSelector(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseSelector(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestListSaysWhy: the MESSAGE column gives the failing probe's last
// message; -o wide adds labels, revisions and a passing probe's message.
func TestListSaysWhy(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	up := probedtest.NewBackend(t, true)
	down := probedtest.NewBackend(t, false)
	mustCreate(t, c, up.Readiness("up"))
	mustCreate(t, c, down.Readiness("down"))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.WaitReady(wctx, "up"); err != nil {
		t.Fatal(err)
	}
	// Until down's probe has run once, it has no message.
	for {
		tg, err := c.Get(ctx, "down")
		if err != nil {
			t.Fatal(err)
		}
		if tg.GetStatus().GetReadiness().GetLastMessage() != "" {
			break
		}
		select {
		case <-wctx.Done():
			t.Fatal("down's probe did not run within 10s")
		case <-time.After(10 * time.Millisecond):
		}
	}

	r := probectl(ctx, s.Addr, "", "list")
	want := [][]string{
		{"NAME", "PHASE", "STARTED", "LIVE", "READY", "STARTUP", "LIVENESS", "READINESS", "AGE", "MESSAGE"},
		{"down", "Active", "true", "true", "false", "-", "-", "failure/100ms", "HTTP probe failed with statuscode: 503"},
		{"up", "Active", "true", "true", "true", "-", "-", "success/100ms", "-"},
	}
	got := tableRows(r.out)
	for i := 1; i < len(got); i++ { // AGE varies; the message has spaces
		got[i] = append(got[i][:8], strings.Join(got[i][9:], " "))
	}
	if diff := cmp.Diff(want, got); r.code != 0 || diff != "" {
		t.Errorf("list: code %d, stderr %q, table (-want +got):\n%s", r.code, r.err, diff)
	}

	r = probectl(ctx, s.Addr, "", "list", "-o", "wide")
	rows := tableRows(r.out)
	if r.code != 0 || len(rows) != 3 {
		t.Fatalf("list -o wide: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	if diff := cmp.Diff([]string{"NAME", "PHASE", "STARTED", "LIVE", "READY", "STARTUP", "LIVENESS", "READINESS", "AGE", "LABELS", "REVISION", "MESSAGE"}, rows[0]); diff != "" {
		t.Errorf("wide header (-want +got):\n%s", diff)
	}
	if got := strings.Join(rows[2][9:], " "); !regexp.MustCompile(`^- \d+ readiness: HTTP 200, 2 bytes$`).MatchString(got) {
		t.Errorf("wide row of up ends with %q, want no labels, its revision and readiness's success message", got)
	}
}
