// Package proxy is an activator-style reverse proxy built on probed's Go
// client, the way Knative's activator fronts a revision scaled to zero: a
// request to a backend that is not known to be ready is held until probed
// says the backend is ready, then forwarded.
//
// For each backend the proxy registers one target in probed with Knative's
// readiness probe (GET /healthz, "K-Network-Probe: queue", expecting 200
// and the body "queue"), probed every 50 ms until ready, then every second.
// All the requests held for a backend share that target and one
// client.WaitReady call. One Watch of the proxy's targets keeps it
// informed afterwards: a backend whose readiness fails is held again. When
// a backend goes away (a forwarded request cannot connect to it, it is
// idle for Options.IdleTimeout, or the proxy is closed) its target is
// deleted; the next request registers it again, fast until ready again.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// ErrClosed is the error of a wait the proxy's Close ended.
var ErrClosed = errors.New("proxy: closed")

// retryDelay is the pause before registering a target again while probed
// is still removing the previous one.
const retryDelay = 20 * time.Millisecond

// Proxy routes each request to a backend by its Host (the backend's name,
// alone or as the first label: "hello", "hello.example.com") or, failing
// that, by the first segment of its path ("/hello/x" goes to "/x" on
// backend hello); a request matching no backend is 404. It holds a
// request whose backend is not known to be ready, at most
// Options.HoldTimeout (503 after it), then forwards it (502 when the
// backend cannot be reached). It is safe for concurrent use.
type Proxy struct {
	c        *client.Client
	opts     Options
	backends map[string]*backend // by name; read-only after New
	stats    counters

	// ctx bounds the waits and the watch; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex // guards closed and wg.Add
	closed bool
	wg     sync.WaitGroup
}

// Stats counts what a Proxy did.
type Stats struct {
	Requests      int64 // requests routed to a backend
	Held          int64 // of them, held because the backend was not known ready
	Waits         int64 // WaitReady calls: one per wait, shared by the requests held meanwhile
	Registrations int64 // targets created
	Reused        int64 // targets found existing and updated to the proxy's spec
	Deleted       int64 // targets deleted because their backend went away
	Failed        int64 // requests answered 502 or 503 by the proxy
}

type counters struct {
	requests, held, waits, registrations, reused, deleted, failed atomic.Int64
}

// New returns a proxy to backends, registering their targets in probed
// through c on demand. It starts watching its targets at once; the caller
// must Close it.
func New(c *client.Client, backends []Backend, opts Options) (*Proxy, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{c: c, opts: opts, backends: make(map[string]*backend, len(backends)), ctx: ctx, cancel: cancel}
	now := time.Now()
	for _, b := range backends {
		spec, err := Target(b, opts)
		if err != nil {
			cancel()
			return nil, err
		}
		if _, dup := p.backends[b.Name]; dup {
			cancel()
			return nil, fmt.Errorf("proxy: backend %q listed twice", b.Name)
		}
		p.backends[b.Name] = p.newBackend(b, spec, now)
	}
	p.goroutine(p.watch)
	if opts.IdleTimeout > 0 {
		p.goroutine(p.reapIdle)
	}
	return p, nil
}

func (p *Proxy) newBackend(b Backend, spec *probev1.Target, now time.Time) *backend {
	be := &backend{Backend: b, spec: spec}
	u := &url.URL{Scheme: "http", Host: b.Addr}
	be.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport: p.opts.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.forwardFailed(w, r, be, err)
		},
	}
	be.lastUsed.Store(now.UnixNano())
	return be
}

// ServeHTTP routes, holds and forwards r.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, r := p.route(r)
	if b == nil {
		http.Error(w, fmt.Sprintf("no backend for host %q and path %q", r.Host, r.URL.Path), http.StatusNotFound)
		return
	}
	p.stats.requests.Add(1)
	b.lastUsed.Store(time.Now().UnixNano())
	if !b.isReady() {
		p.stats.held.Add(1)
		if err := p.hold(r.Context(), b); err != nil {
			if r.Context().Err() != nil {
				return // the client is gone
			}
			p.stats.failed.Add(1)
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("backend %s is not ready: %v", b.Name, err), http.StatusServiceUnavailable)
			return
		}
	}
	b.rp.ServeHTTP(w, r)
}

// route returns the backend of r and the request to forward, nil when
// no backend matches.
func (p *Proxy) route(r *http.Request) (*backend, *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	first, _, _ := strings.Cut(host, ".")
	if b := p.backends[first]; b != nil {
		return b, r
	}
	seg, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	b := p.backends[seg]
	if b == nil {
		return nil, r
	}
	r = r.Clone(r.Context())
	r.URL.Path, r.URL.RawPath = "/"+rest, ""
	return b, r
}

// hold waits until b is ready, ctx is done or the wait fails.
func (p *Proxy) hold(ctx context.Context, b *backend) error {
	f := p.join(b)
	if f == nil {
		return nil
	}
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// join returns the wait in progress for b, starting one if there is
// none, or nil when b became ready meanwhile.
func (p *Proxy) join(b *backend) *flight {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ready {
		return nil
	}
	if b.flight != nil {
		return b.flight
	}
	f := &flight{done: make(chan struct{})}
	started := p.goroutine(func() {
		err := p.activate(b)
		b.mu.Lock()
		b.flight = nil
		b.mu.Unlock()
		f.err = err
		close(f.done)
	})
	if !started {
		f.err = ErrClosed
		close(f.done)
		return f
	}
	b.flight = f
	return f
}

// activate registers b's target (or reuses it) and waits until it is
// ready, at most HoldTimeout.
func (p *Proxy) activate(b *backend) error {
	ctx, cancel := context.WithTimeout(p.ctx, p.opts.HoldTimeout)
	defer cancel()
	start := time.Now()
	for {
		if err := p.register(ctx, b); err != nil {
			return p.waitErr(ctx, err)
		}
		p.stats.waits.Add(1)
		t, err := p.c.WaitReady(ctx, b.Name)
		if err == nil {
			b.observe(t.GetStatus().GetRevision(), true, true)
			p.opts.Logger.Info("backend ready", "backend", b.Name, "waited", time.Since(start).Round(time.Microsecond))
			return nil
		}
		if !errors.Is(err, client.ErrNotFound) {
			return p.waitErr(ctx, err)
		}
		// Deleted while we waited (the backend went away and came back):
		// register it again.
		b.unregister()
		if !sleep(ctx, retryDelay) {
			return p.waitErr(ctx, ctx.Err())
		}
	}
}

// waitErr names the cause of a wait (under ctx) that ended with err.
func (p *Proxy) waitErr(ctx context.Context, err error) error {
	switch {
	case p.ctx.Err() != nil:
		return ErrClosed
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		// The call may report the deadline its own way (a cancelled
		// stream): say what happened.
		return fmt.Errorf("not ready after %v: %w", p.opts.HoldTimeout, context.DeadlineExceeded)
	}
	return err
}

// register creates b's target unless the proxy knows it exists. A target
// by that name that exists already is reused (updated to the proxy's
// spec); one being removed is waited for.
func (p *Proxy) register(ctx context.Context, b *backend) error {
	if b.isRegistered() {
		return nil
	}
	for {
		t, err := p.c.Create(ctx, b.spec)
		if err == nil {
			p.stats.registrations.Add(1)
			b.observe(t.GetStatus().GetRevision(), t.GetStatus().GetReady(), true)
			p.opts.Logger.Info("registered target", "backend", b.Name, "addr", b.Addr)
			return nil
		}
		if !errors.Is(err, client.ErrAlreadyExists) {
			return fmt.Errorf("register target %s: %w", b.Name, err)
		}
		t, err = p.c.Update(ctx, b.spec)
		if err == nil {
			p.stats.reused.Add(1)
			b.observe(t.GetStatus().GetRevision(), t.GetStatus().GetReady(), true)
			return nil
		}
		if !errors.Is(err, client.ErrFailedPrecondition) && !errors.Is(err, client.ErrNotFound) {
			return fmt.Errorf("reuse target %s: %w", b.Name, err)
		}
		// Terminating, or removed between the two calls: try again.
		if !sleep(ctx, retryDelay) {
			return ctx.Err()
		}
	}
}

// forwardFailed answers a request that could not be forwarded. A backend
// that cannot be connected to is gone: its target is deleted.
func (p *Proxy) forwardFailed(w http.ResponseWriter, r *http.Request, b *backend, err error) {
	p.stats.failed.Add(1)
	if opErr, ok := errors.AsType[*net.OpError](err); ok && opErr.Op == "dial" {
		p.forget(b, "connection failed")
	}
	p.opts.Logger.Warn("forwarding failed", "backend", b.Name, "path", r.URL.Path, "err", err)
	w.WriteHeader(http.StatusBadGateway)
}

// forget deletes b's target (the backend went away), if the proxy knows
// it exists.
func (p *Proxy) forget(b *backend, why string) {
	if !b.unregister() {
		return
	}
	p.stats.deleted.Add(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 5*time.Second)
	defer cancel()
	t, err := p.c.Delete(ctx, b.Name)
	switch {
	case err == nil:
		b.observe(t.GetStatus().GetRevision(), false, false)
		p.opts.Logger.Info("deleted target", "backend", b.Name, "why", why)
	case !errors.Is(err, client.ErrNotFound):
		p.opts.Logger.Warn("deleting target", "backend", b.Name, "err", err)
	}
}

// reapIdle forgets the backends idle for IdleTimeout, until Close.
func (p *Proxy) reapIdle() {
	t := time.NewTicker(max(p.opts.IdleTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case now := <-t.C:
			for _, b := range p.backends {
				if b.idle(now, p.opts.IdleTimeout) {
					p.forget(b, "idle")
				}
			}
		}
	}
}

// goroutine runs f in a goroutine Close waits for; it reports false,
// without running f, once the proxy is closed.
func (p *Proxy) goroutine(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Go(f)
	return true
}

// Close stops the proxy: the held requests fail with 503, the watch
// stops, and the targets of the backends are deleted (ctx bounds the
// deletions). Requests served afterwards fail.
func (p *Proxy) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	if t, ok := p.opts.Transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	var errs []error
	for _, b := range p.backends {
		if !b.unregister() {
			continue
		}
		if _, err := p.c.Delete(ctx, b.Name); err != nil && !errors.Is(err, client.ErrNotFound) {
			errs = append(errs, fmt.Errorf("delete target %s: %w", b.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Ready reports whether the proxy knows backend name to be ready, so that
// its requests are forwarded without waiting.
func (p *Proxy) Ready(name string) bool {
	b := p.backends[name]
	return b != nil && b.isReady()
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	return Stats{
		Requests:      p.stats.requests.Load(),
		Held:          p.stats.held.Load(),
		Waits:         p.stats.waits.Load(),
		Registrations: p.stats.registrations.Load(),
		Reused:        p.stats.reused.Load(),
		Deleted:       p.stats.deleted.Load(),
		Failed:        p.stats.failed.Load(),
	}
}

// sleep waits for d or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
