package probedtest

import (
	"bufio"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Hostile probe targets on loopback, for tests that check a target cannot
// hurt probed: each stops, and its goroutines are waited for, when the
// test ends.

// Holding is a TCP listener that accepts connections and never writes a
// byte: a TLS handshake or an HTTP/2 preface with it never finishes.
type Holding struct {
	Addr string // "127.0.0.1:port"
	open atomic.Int64
}

// Open returns how many of its connections the client has not closed.
func (h *Holding) Open() int64 { return h.open.Load() }

// NewHolding starts a Holding listener.
func NewHolding(t testing.TB) *Holding {
	t.Helper()
	lis := listen(t)
	h := &Holding{Addr: lis.Addr().String()}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			h.open.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				buf := make([]byte, 16<<10)
				for { // read and drop until the client closes
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				h.open.Add(-1)
			})
		}
	})
	t.Cleanup(func() {
		_ = lis.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return h
}

// HeaderServer answers every HTTP request with statusLine, then the
// header lines next returns until it returns "", then an empty body; next
// may return the same line for ever (an endless header). It returns the
// server's address.
func HeaderServer(t testing.TB, statusLine string, next func(i int) string) string {
	t.Helper()
	lis := listen(t)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				w := bufio.NewWriterSize(c, 32<<10)
				_, err := w.WriteString(statusLine + "\r\n")
				for i := 0; err == nil; i++ {
					h := next(i)
					if h == "" {
						_, _ = w.WriteString("Content-Length: 0\r\n\r\n")
						break
					}
					// Two writes: a concatenation would allocate, and tests
					// measure the process's allocations.
					if _, err = w.WriteString(h); err == nil {
						_, err = w.WriteString("\r\n")
					}
				}
				_ = w.Flush()
			})
		}
	})
	t.Cleanup(func() {
		_ = lis.Close()
		wg.Wait()
	})
	return lis.Addr().String()
}

// failingHealth answers Health/Check with Unavailable and message.
type failingHealth struct {
	healthpb.UnimplementedHealthServer
	message string
}

func (h *failingHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, status.Error(codes.Unavailable, h.message)
}

// FailingHealthServer is a gRPC health server whose Check fails with
// Unavailable and message (as long as the test likes). It returns the
// server's address.
func FailingHealthServer(t testing.TB, message string) string {
	t.Helper()
	lis := listen(t)
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, &failingHealth{message: message})
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Serve(lis) })
	t.Cleanup(func() {
		s.Stop()
		wg.Wait()
	})
	return lis.Addr().String()
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}
