package connlimit_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/probed/probed/server/connlimit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// serveLoopback wraps a loopback listener and accepts on it until the test
// ends; accepted connections arrive on the returned channel.
func serveLoopback(t *testing.T, opts connlimit.Options) (*connlimit.Listener, <-chan net.Conn) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.Wrap(raw, opts)
	accepted := make(chan net.Conn, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		close(accepted)
		for c := range accepted {
			_ = c.Close()
		}
	})
	return l, accepted
}

func dial(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByServer reports whether the server closed c (a read fails with
// EOF or a reset rather than timing out).
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// stillOpen reports whether c is open: the server end (s) receives what
// c writes.
func stillOpen(c, s net.Conn) bool {
	if _, err := c.Write([]byte{1}); err != nil {
		return false
	}
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.ReadFull(s, make([]byte, 1))
	return err == nil
}

func TestBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts connlimit.Options
		// admitFirst admits the first connections before the next is dialled.
		admitFirst bool
		dials      int
		accepted   int
	}{
		{name: "in all", opts: connlimit.Options{Max: 2}, dials: 3, accepted: 2},
		{name: "per IP address", opts: connlimit.Options{PerIP: 3}, dials: 4, accepted: 3},
		{name: "not admitted", opts: connlimit.Options{Pending: 2}, dials: 3, accepted: 2},
		{name: "admitted ones are not pending", opts: connlimit.Options{Pending: 2}, admitFirst: true, dials: 4, accepted: 4},
		{name: "no bound", dials: 5, accepted: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, accepted := serveLoopback(t, tt.opts)
			var clients []net.Conn
			got := 0
			for range tt.dials {
				c, err := net.Dial("tcp", l.Addr().String())
				if err != nil { // reset before connect returned: refused
					continue
				}
				t.Cleanup(func() { _ = c.Close() })
				clients = append(clients, c)
				select {
				case s := <-accepted:
					got++
					if tt.admitFirst {
						l.Admit(s.RemoteAddr())
					}
				case <-time.After(time.Second):
					// Refused: Accept closes it and waits for the next.
				}
			}
			if got != tt.accepted {
				t.Errorf("accepted %d of %d connections, want %d", got, tt.dials, tt.accepted)
			}
			refused := tt.dials - tt.accepted
			if refused > 0 && len(clients) == tt.dials && !closedByServer(t, clients[len(clients)-1]) {
				t.Errorf("the connection over the bound is still open")
			}
			if st := l.Stats(); st.Refused != refused || st.Open != tt.accepted {
				t.Errorf("stats %+v, want %d refused and %d open", st, refused, tt.accepted)
			}
		})
	}
}

func TestClosingFreesTheSlot(t *testing.T) {
	t.Parallel()
	l, accepted := serveLoopback(t, connlimit.Options{Max: 1, PerIP: 1, Pending: 1})
	dial(t, l.Addr())
	s := <-accepted
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close() // twice counts once
	c := dial(t, l.Addr())
	s2 := <-accepted
	if !stillOpen(c, s2) {
		t.Fatal("the connection after a closed one was not accepted")
	}
	if st := l.Stats(); st != (connlimit.Stats{Open: 1, Pending: 1}) {
		t.Errorf("stats %+v, want one open and pending", st)
	}
}

func TestConnectionsNotAdmittedInTimeAreClosed(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	l, accepted := serveLoopback(t, connlimit.Options{AdmitWithin: 10 * time.Second, Clock: clock})
	silent := dial(t, l.Addr())
	<-accepted
	authenticated := dial(t, l.Addr())
	s := <-accepted
	l.Admit(s.RemoteAddr())
	l.Admit(s.RemoteAddr()) // twice does nothing more
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(9 * time.Second)
	if st := l.Stats(); st.Expired != 0 || st.Pending != 1 {
		t.Fatalf("before the deadline: %+v, want nothing expired and one pending", st)
	}
	clock.Advance(time.Second)
	if !closedByServer(t, silent) {
		t.Error("a connection that was never admitted is open after the deadline")
	}
	if !stillOpen(authenticated, s) {
		t.Error("an admitted connection was closed")
	}
	if st := l.Stats(); st != (connlimit.Stats{Open: 1, Expired: 1}) {
		t.Errorf("stats %+v, want one open (admitted) and one expired", st)
	}
}

// lockedBuffer is a bytes.Buffer safe for the listener's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestRefusalsAreWarnedAtMostEveryMinute(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	clock := clockwork.NewFakeClock()
	l, accepted := serveLoopback(t, connlimit.Options{Max: 1, Clock: clock, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	dial(t, l.Addr())
	<-accepted
	waitRefused := func(n int) {
		t.Helper()
		for range 3 {
			// Accept counts and warns before it closes (with a reset,
			// which may reach the dial itself).
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				continue
			}
			closedByServer(t, c)
			_ = c.Close()
		}
		if got := l.Stats().Refused; got != n {
			t.Fatalf("%d refused, want %d", got, n)
		}
	}
	waitRefused(3)
	clock.Advance(time.Minute)
	waitRefused(6)
	got := strings.Count(logs.String(), "level=WARN")
	if got != 2 {
		t.Errorf("%d warnings for 6 refusals a minute apart in two bursts, want 2:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "refused=3") {
		t.Errorf("the second warning does not count the 3 refusals since the first (refused=3):\n%s", logs.String())
	}
}
