package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// watchCLI runs probectl watch until until(stdout) holds, then interrupts
// it and returns what it printed.
func watchCLI(t *testing.T, addr string, until func(out string) bool, args ...string) result {
	t.Helper()
	return watchCLIUntil(t, addr, func(out, _ string) bool { return until(out) }, args...)
}

// watchCLIUntil is watchCLI with a condition on stdout and stderr.
func watchCLIUntil(t *testing.T, addr string, until func(out, errOut string) bool, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, append([]string{"--addr", addr}, args...), strings.NewReader(""), &out, &errOut)
	}()
	deadline := time.After(10 * time.Second)
	for !until(out.String(), errOut.String()) {
		select {
		case c := <-code:
			t.Fatalf("watch exited early with %d: stdout %q, stderr %q", c, out.String(), errOut.String())
		case <-deadline:
			cancel()
			<-code
			t.Fatalf("watch output incomplete after 10s: %q", out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	return result{code: <-code, out: out.String(), err: errOut.String()}
}

func lines(n int) func(string) bool {
	return func(s string) bool { return strings.Count(s, "\n") >= n }
}

func TestWatchCommand(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	mustCreate(t, c, &probev1.Target{Name: "a", Labels: map[string]string{"team": "x"}})
	mustCreate(t, c, &probev1.Target{Name: "b"})

	t.Run("table", func(t *testing.T) {
		t.Parallel()
		// Once the header and the snapshot are out, a live change.
		updated := false
		r := watchCLI(t, s.Addr, func(out string) bool {
			if !updated && lines(2)(out) {
				updated = true
				if _, err := c.Update(ctx, &probev1.Target{Name: "a", Labels: map[string]string{"team": "x", "v": "2"}}); err != nil {
					t.Errorf("Update: %v", err)
				}
			}
			return lines(3)(out)
		}, "watch", "-l", "team=x")
		if r.code != 0 || r.err != "" {
			t.Fatalf("code %d, stderr %q", r.code, r.err)
		}
		rows := tableRows(r.out)
		if diff := cmp.Diff([]string{"REVISION", "TIME", "TARGET", "EVENT", "PROBE", "FROM→TO", "READY", "MESSAGE"}, rows[0]); diff != "" {
			t.Errorf("header (-want +got):\n%s", diff)
		}
		snapshot := []string{"-", "a", "snapshot", "-", "-", "true", "-"}
		if diff := cmp.Diff(snapshot, rows[1][1:]); diff != "" {
			t.Errorf("snapshot row (-want +got):\n%s", diff)
		}
		if len(rows[2]) != 8 || rows[2][2] != "a" || rows[2][3] != "updated" || rows[2][6] != "true" {
			t.Errorf("live row = %q, want an update of a", rows[2])
		}
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(rows[2][1]) {
			t.Errorf("time %q is not RFC 3339 with milliseconds", rows[2][1])
		}
		// Columns line up: every cell starts where the header's does.
		text := strings.Split(r.out, "\n")
		header := []rune(text[0])
		for _, col := range []string{"TARGET", "EVENT", "READY", "MESSAGE"} {
			at := len([]rune(text[0][:strings.Index(text[0], col)]))
			for _, line := range text[1:3] {
				l := []rune(line)
				if at >= len(l) || l[at-1] != ' ' || l[at] == ' ' {
					t.Errorf("column %s (at %d in %q) not aligned in %q", col, at, string(header), line)
				}
			}
		}
	})

	t.Run("json since", func(t *testing.T) {
		t.Parallel()
		r := watchCLI(t, s.Addr, lines(2), "-o", "json", "watch", "--since", "1", "--kinds", "created")
		if r.code != 0 {
			t.Fatalf("code %d, stderr %q", r.code, r.err)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(r.out), "\n")[:2] {
			var ev probev1.Event
			if err := unmarshalJSON(line, &ev); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			got = append(got, ev.GetName()+" "+ev.GetKind().String())
		}
		if diff := cmp.Diff([]string{"a EVENT_KIND_CREATED", "b EVENT_KIND_CREATED"}, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})

	t.Run("invalid name", func(t *testing.T) {
		t.Parallel()
		r := probectl(ctx, s.Addr, "", "watch", "Not_A_Name")
		if r.code != 1 || !strings.HasPrefix(r.err, "invalid request:\n  names[0]: Invalid value: \"Not_A_Name\": ") {
			t.Errorf("code %d, stderr %q", r.code, r.err)
		}
	})
}

// TestWatchSaysWhatItWaitsFor: a watch that has nothing to print says on
// stderr why: probed cannot be reached (and then that it is connected),
// or no target matches yet.
func TestWatchSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	mustCreate(t, c, &probev1.Target{Name: "a", Labels: map[string]string{"team": "x"}})

	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown name", []string{"watch", "ghost"}, "probectl: no target named \"ghost\" yet; waiting for it (Ctrl-C to stop)\n"},
		{"some names unknown", []string{"watch", "a", "b", "c"}, "probectl: no targets named \"b\", \"c\" yet; waiting for them (Ctrl-C to stop)\n"},
		{"no match", []string{"watch", "-l", "team=y"}, "probectl: no target matches team=y yet; waiting for one (Ctrl-C to stop)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := watchCLIUntil(t, s.Addr, func(_, errOut string) bool { return strings.HasSuffix(errOut, "\n") }, tt.args...)
			if r.code != 0 || r.err != tt.wantErr {
				t.Errorf("code %d, stderr %q; want 0, %q", r.code, r.err, tt.wantErr)
			}
		})
	}

	t.Run("probed down, then up", func(t *testing.T) {
		t.Parallel()
		addr := refused.Reserve(t).Addr()
		var srv *probedtest.Server
		r := watchCLIUntil(t, addr, func(out, errOut string) bool {
			if srv == nil && strings.Contains(errOut, "retrying") {
				srv = probedtest.Start(t, probedtest.Options{Addr: addr})
			}
			return strings.Contains(errOut, "connected to probed")
		}, "watch")
		wantErr := "probectl: cannot reach probed at " + addr + ": {{any}}connection refused{{any}}; retrying (Ctrl-C to stop)\n" +
			"probectl: connected to probed at " + addr + "\n"
		if r.code != 0 || !matchPattern(wantErr, strings.Replace(r.err, "probectl: no targets yet; waiting for events (Ctrl-C to stop)\n", "", 1)) {
			t.Errorf("code %d, stderr:\n%s\nwant:\n%s", r.code, r.err, wantErr)
		}
	})
}
