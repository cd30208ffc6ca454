package main

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
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
		{"timeout says why", []string{"wait-ready", "never", "--timeout", "300ms"}, 1, "",
			"Error: target \"never\" did not become ready within 300ms: readiness probe: failure ({{any}} in a row, last {{any}} ago): HTTP probe failed with statuscode: 503\n"},
		{"not found", []string{"wait-ready", "ghost"}, 1, "", "Error: target \"ghost\": not found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := probectl(ctx, s.Addr, "", tt.args...)
			if r.code != tt.code || r.out != tt.out || !matchPattern(tt.err, r.err) {
				t.Errorf("got code %d, stdout %q, stderr %q; want %d, %q, %q", r.code, r.out, r.err, tt.code, tt.out, tt.err)
			}
		})
	}
}

// TestWaitReadyUnreachable: a probed that cannot be reached is said at
// once, as list says it, not after the timeout as a target not ready.
func TestWaitReadyUnreachable(t *testing.T) {
	t.Parallel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(refused.Port(t))))
	r := probectl(t.Context(), addr, "", "wait-ready", "web", "--timeout", "1h")
	if r.code != 1 || r.out != "" || !strings.HasPrefix(r.err, "Error: cannot reach probed: ") || !strings.Contains(r.err, "connection refused") {
		t.Errorf("got code %d, stdout %q, stderr %q; want 1 and a cannot-reach message", r.code, r.out, r.err)
	}
}

// TestWaitReadyLosesProbed: probed goes away while wait-ready waits: it
// says so on stderr and, at the timeout, says that probed could not be
// reached rather than blaming the target.
func TestWaitReadyLosesProbed(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	never := probedtest.NewBackend(t, false)
	mustCreate(t, c, never.Readiness("never"))
	var out, errOut syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(t.Context(), []string{"--addr", s.Addr, "wait-ready", "never", "--timeout", "3s"}, strings.NewReader(""), &out, &errOut)
	}()
	// Once the wait watches the target, stop probed.
	for s.Engine.Stats().Watchers == 0 {
		select {
		case c := <-code:
			t.Fatalf("wait-ready ended with %d before probed stopped: %s", c, errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	s.Stop()
	got := <-code
	wantErr := "probectl: lost probed at " + s.Addr + ": {{any}}; reconnecting\n" +
		`Error: target "never" did not become ready within 3s: cannot reach probed at ` + s.Addr + ": {{any}}\n"
	if got != 1 || out.String() != "" || !matchPattern(wantErr, errOut.String()) {
		t.Errorf("got code %d, stdout %q, stderr:\n%s\nwant 1 and stderr:\n%s", got, out.String(), errOut.String(), wantErr)
	}
}
