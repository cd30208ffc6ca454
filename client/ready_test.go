package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestWaitReady(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout time.Duration
		// setup creates what the test needs and returns the target to wait
		// for and, optionally, what to do while WaitReady waits (once its
		// watch is open on s).
		setup     func(t *testing.T, c *client.Client) (name string, during func())
		wantErr   error
		wantProbe probev1.Result // readiness result of the returned target
	}{
		{
			name:    "already ready",
			timeout: 5 * time.Second,
			setup: func(t *testing.T, c *client.Client) (string, func()) {
				mustCreate(t, c, plain("ready", nil))
				return "ready", nil
			},
		},
		{
			name:    "becomes ready",
			timeout: 10 * time.Second,
			setup: func(t *testing.T, c *client.Client) (string, func()) {
				b := probedtest.NewBackend(t, false)
				mustCreate(t, c, b.Readiness("flip"))
				return "flip", func() { b.SetHealthy(true) }
			},
			wantProbe: probev1.Result_RESULT_SUCCESS,
		},
		{
			name:    "not found",
			timeout: 5 * time.Second,
			setup:   func(*testing.T, *client.Client) (string, func()) { return "ghost", nil },
			wantErr: client.ErrNotFound,
		},
		{
			name:    "deleted while waiting",
			timeout: 10 * time.Second,
			setup: func(t *testing.T, c *client.Client) (string, func()) {
				b := probedtest.NewBackend(t, false)
				mustCreate(t, c, lingering(b.Readiness("doomed")))
				return "doomed", func() {
					if _, err := c.Delete(t.Context(), "doomed"); err != nil {
						t.Errorf("Delete: %v", err)
					}
				}
			},
			wantErr: client.ErrNotFound,
		},
		{
			name:    "timeout",
			timeout: 300 * time.Millisecond,
			setup: func(t *testing.T, c *client.Client) (string, func()) {
				b := probedtest.NewBackend(t, false)
				mustCreate(t, c, b.Readiness("never"))
				return "never", nil
			},
			wantErr: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, c := start(t, probedtest.Options{})
			name, during := tt.setup(t, c)
			if during != nil {
				done := make(chan struct{})
				defer func() { <-done }()
				go func() {
					defer close(done)
					// WaitReady's watch is the server's only one.
					if err := poll.Wait("WaitReady's watch", 10*time.Second, func() bool { return s.Engine.Stats().Watchers > 0 }); err != nil {
						t.Error(err)
						return
					}
					during()
				}()
			}
			ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
			defer cancel()
			begin := time.Now()
			got, err := c.WaitReady(ctx, name)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("WaitReady error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("WaitReady: %v (after %v)", err, time.Since(begin))
			}
			if got.GetName() != name || !got.GetStatus().GetReady() {
				t.Errorf("WaitReady = %v, want %s ready", got, name)
			}
			if res := got.GetStatus().GetReadiness().GetResult(); res != tt.wantProbe {
				t.Errorf("readiness result = %v, want %v", res, tt.wantProbe)
			}
		})
	}
}

func mustCreate(t *testing.T, c *client.Client, tg *probev1.Target) {
	t.Helper()
	if _, err := c.Create(t.Context(), tg); err != nil {
		t.Fatalf("Create %s: %v", tg.GetName(), err)
	}
}
