package main

import (
	"testing"
	"time"

	"github.com/probed/probed/internal/probedtest"
)

func TestWaitReadyCommand(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	never := probedtest.NewBackend(t, false)
	mustCreate(t, c, never.Readiness("never"))
	soon := probedtest.NewBackend(t, false)
	mustCreate(t, c, soon.Readiness("soon"))
	time.AfterFunc(200*time.Millisecond, func() { soon.SetHealthy(true) })

	tests := []struct {
		name     string
		args     []string
		code     int
		out, err string
	}{
		{"becomes ready", []string{"wait-ready", "soon", "--timeout", "10s"}, 0, "target/soon ready\n", ""},
		{"timeout", []string{"wait-ready", "never", "--timeout", "300ms"}, 1, "", "Error: target \"never\" did not become ready within 300ms\n"},
		{"not found", []string{"wait-ready", "ghost"}, 1, "", "Error: target \"ghost\": not found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := probectl(ctx, s.Addr, "", tt.args...)
			if r.code != tt.code || r.out != tt.out || r.err != tt.err {
				t.Errorf("got code %d, stdout %q, stderr %q; want %d, %q, %q", r.code, r.out, r.err, tt.code, tt.out, tt.err)
			}
		})
	}
}
