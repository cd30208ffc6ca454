package client_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The etcd the store tests share (stores_test.go) stops before the
	// leak check.
	etcdtest.StopShared()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fastReconnect makes gRPC redial a restarted server within tens of
// milliseconds instead of its default second.
var fastReconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
	MinConnectTimeout: time.Second,
})

// dial returns a client of addr, closed when the test ends.
func dial(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	opts = append([]client.Option{client.WithDialOptions(fastReconnect)}, opts...)
	c, err := client.Dial(t.Context(), addr, opts...)
	if err != nil {
		t.Fatalf("Dial(%q): %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// start starts a probed and returns it with a client of it.
func start(t *testing.T, opts probedtest.Options) (*probedtest.Server, *client.Client) {
	t.Helper()
	s := probedtest.Start(t, opts)
	return s, dial(t, s.Addr)
}

// plain returns a target with no probes: ready as soon as it is created.
func plain(name string, labels map[string]string) *probev1.Target {
	return &probev1.Target{Name: name, Labels: labels}
}

func ptr[T any](v T) *T { return &v }

// lingering gives t a preStop sleep, so that once deleted it stays
// TERMINATING for a while. (A target without one can be removed before
// DeleteTarget reads it back, which then answers NotFound.)
func lingering(t *probev1.Target) *probev1.Target {
	t.Lifecycle = &probev1.Lifecycle{PreStop: &probev1.LifecycleHandler{
		Action: &probev1.LifecycleHandler_Sleep{Sleep: &probev1.SleepAction{Seconds: 30}},
	}}
	return t
}

// proxy forwards TCP connections to a backend; a test cuts them and
// refuses new ones to simulate a network failure without stopping the
// server.
type proxy struct {
	lis     net.Listener
	backend string

	mu    sync.Mutex // guards conns and down
	conns map[net.Conn]struct{}
	down  bool
	wg    sync.WaitGroup
}

func newProxy(t *testing.T, backend string) *proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{lis: lis, backend: backend, conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		_ = lis.Close()
		p.setDown(true)
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.lis.Addr().String() }

func (p *proxy) serve() {
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.backend)
		if err != nil {
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { pipe(out, in) })
		p.wg.Go(func() { pipe(in, out) })
	}
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// setDown cuts every connection (when down) and refuses new ones until
// set up again.
func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if !down {
		return
	}
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// watchCounter counts Watch streams opened through a connection.
type watchCounter struct{ n atomic.Int32 }

func (w *watchCounter) option() client.Option {
	return client.WithDialOptions(grpc.WithStreamInterceptor(
		func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			w.n.Add(1)
			return streamer(ctx, desc, cc, method, opts...)
		}))
}

// recv returns the next response of a watch, failing the test after a
// while.
func recv(t *testing.T, ch <-chan client.WatchResponse) client.WatchResponse {
	t.Helper()
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no watch response within 10s")
	}
	panic("unreachable")
}

// recvEvents reads responses until it has n events (progress
// notifications skipped) and returns them.
func recvEvents(t *testing.T, ch <-chan client.WatchResponse, n int) []*probev1.Event {
	t.Helper()
	var evs []*probev1.Event
	for len(evs) < n {
		r := recv(t, ch)
		if r.Err != nil {
			t.Fatalf("watch ended: %v", r.Err)
		}
		evs = append(evs, r.Events...)
	}
	if len(evs) > n {
		t.Fatalf("got %d events, want %d: %v", len(evs), n, evs)
	}
	return evs
}

// recvSnapshot reads a whole snapshot and returns its events and the
// first response.
func recvSnapshot(t *testing.T, ch <-chan client.WatchResponse) (first client.WatchResponse, evs []*probev1.Event) {
	t.Helper()
	for i := 0; ; i++ {
		r := recv(t, ch)
		if r.Err != nil {
			t.Fatalf("watch ended: %v", r.Err)
		}
		if !r.Snapshot {
			t.Fatalf("response %d is not part of a snapshot: %+v", i, r)
		}
		if i == 0 {
			first = r
		}
		evs = append(evs, r.Events...)
		if r.SnapshotComplete {
			return first, evs
		}
	}
}

func names(evs []*probev1.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.GetName()
	}
	return out
}
