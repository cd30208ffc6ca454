// Package pod is a fake Knative pod for tests and demos: it starts
// listening after a delay (the container's start time), answers the
// activator's readiness probe as queue-proxy does, serves a hello
// response, and can flap between ready and unready. It records when it
// started listening and when it first answered a probe 200, the two
// instants a cold-start measurement needs.
package pod

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// The readiness probe of Knative's activator.
const (
	ProbeHeader = "K-Network-Probe"
	ProbeQueue  = "queue" // the header's value and the body of a ready answer
)

// Options configure a Pod.
type Options struct {
	// Addr is the listen address, e.g. "127.0.0.1:8081".
	Addr string
	// Name is in the hello response (default "pod").
	Name string
	// Delay before the pod listens.
	Delay time.Duration
	// Flap, when positive, makes the pod ready for Flap, then unready for
	// Flap, and so on, from when it starts listening.
	Flap time.Duration
	// Logger (default: discard).
	Logger *slog.Logger
}

// Stats is what a pod saw; zero times mean "not yet".
type Stats struct {
	Listening  time.Time // when it started listening
	FirstReady time.Time // when it answered a probe 200 for the first time
	// Probes and ReadyProbes count probes received and answered 200.
	Probes, ReadyProbes int
	// Requests counts the other requests; EarlyRequests those that came
	// before any probe had been answered 200 (a proxy that waits for
	// readiness sends none).
	Requests, EarlyRequests int
}

// Pod is a fake pod. Create it with New, then call Run.
type Pod struct {
	opts Options

	mu        sync.Mutex // guards stats and lastReady
	stats     Stats
	lastReady bool // the last probe's answer
}

// New returns a pod that does nothing until Run.
func New(opts Options) *Pod {
	if opts.Name == "" {
		opts.Name = "pod"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pod{opts: opts}
}

// Run waits for the delay, listens and serves until ctx is done, then
// shuts down (within a second) and returns nil; it returns an error when
// it cannot listen.
func (p *Pod) Run(ctx context.Context) error {
	t := time.NewTimer(p.opts.Delay)
	select {
	case <-ctx.Done():
		t.Stop()
		return nil
	case <-t.C:
	}
	lis, err := net.Listen("tcp", p.opts.Addr)
	if err != nil {
		return fmt.Errorf("pod: %w", err)
	}
	p.mu.Lock()
	p.stats.Listening = time.Now()
	p.mu.Unlock()
	p.opts.Logger.Info("pod listening", "addr", lis.Addr().String(), "after", p.opts.Delay)
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	stopped := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
	})
	defer stopped()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("pod: %w", err)
	}
	return nil
}

// ServeHTTP answers a request carrying K-Network-Probe as queue-proxy
// does (200 "queue" when ready, 503 when not, 400 for a value other than
// "queue"), any other request with a hello.
func (p *Pod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	probe, isProbe := r.Header[http.CanonicalHeaderKey(ProbeHeader)]
	if !isProbe {
		p.hello(w)
		return
	}
	if len(probe) != 1 || probe[0] != ProbeQueue {
		http.Error(w, fmt.Sprintf("unexpected %s value %q", ProbeHeader, probe), http.StatusBadRequest)
		return
	}
	ready := p.answerProbe(time.Now())
	if !ready {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte(ProbeQueue))
}

// answerProbe counts a probe received at now and returns the answer.
func (p *Pod) answerProbe(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ready := p.readyLocked(now)
	p.stats.Probes++
	if ready {
		p.stats.ReadyProbes++
		if p.stats.FirstReady.IsZero() {
			p.stats.FirstReady = now
		}
	}
	if ready != p.lastReady || p.stats.Probes == 1 {
		p.opts.Logger.Info("pod readiness", "ready", ready)
	}
	p.lastReady = ready
	return ready
}

// readyLocked reports whether the pod is ready at now; p.mu held.
func (p *Pod) readyLocked(now time.Time) bool {
	if p.opts.Flap <= 0 {
		return true
	}
	return now.Sub(p.stats.Listening)/p.opts.Flap%2 == 0
}

func (p *Pod) hello(w http.ResponseWriter) {
	p.mu.Lock()
	p.stats.Requests++
	if p.stats.FirstReady.IsZero() {
		p.stats.EarlyRequests++
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "Hello from %s!\n", p.opts.Name)
}

// Stats returns what the pod saw so far.
func (p *Pod) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}
