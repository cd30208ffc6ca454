package probedproc_test

import (
	"context"
	"testing"
	"time"

	"github.com/probed/probed/internal/probedproc"
)

// TestServing: Done closes once the serving line has been written, in
// whatever pieces it arrives, and not before.
func TestServing(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   bool
	}{
		{name: "text log", writes: []string{"time=... level=INFO msg=\"opening store\"\n", "time=... level=INFO msg=\"probed serving\" addr=127.0.0.1:1\n"}, want: true},
		{name: "JSON log", writes: []string{`{"level":"INFO","msg":"probed serving","addr":"127.0.0.1:1"}` + "\n"}, want: true},
		{name: "split across writes", writes: []string{"msg=\"probed ser", "ving\"\n"}, want: true},
		{name: "other lines only", writes: []string{"probed\n", "serving\n", "probed listening\n"}, want: false},
		{name: "nothing", writes: nil, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := probedproc.NewServing()
			for _, w := range tt.writes {
				if n, err := s.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			got := false
			select {
			case <-s.Done():
				got = true
			default:
			}
			if got != tt.want {
				t.Errorf("served = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBuildStartStop builds probed, reads its flags, starts it on port 0
// with a data dir at several log levels and formats, sees it serve (the
// serving line is written whatever the level) and stops it gracefully.
func TestBuildStartStop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds probed")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	bin, err := probedproc.Build(ctx, t.TempDir(), t.Output())
	if err != nil {
		t.Fatal(err)
	}
	flags, err := probedproc.Flags(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"addr", "data-dir", "metrics-addr", "log-level", "log-format"} {
		if !flags[f] {
			t.Errorf("Flags lists no --%s: %v", f, flags)
		}
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{name: "default level", args: nil},
		{name: "level error", args: []string{"--log-level=error"}},
		{name: "JSON at level warn", args: []string{"--log-format=json", "--log-level=warn"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := probedproc.Start(bin, append([]string{"--addr=127.0.0.1:0", "--metrics-addr=", "--data-dir=" + t.TempDir()}, tt.args...), probedproc.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Kill() })
			if err := p.WaitServing(time.Until(deadline(ctx))); err != nil {
				t.Fatal(err)
			}
			if err := p.Stop(30 * time.Second); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
}

// deadline is ctx's deadline (it has one).
func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
