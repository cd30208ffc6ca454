package netns_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/kube/internal/netns"
)

// timeWaitEnv runs TestLingeringConnectsInTimeWait for the duration it
// holds ("90s"); timeWaitInside marks the run inside the namespace.
const (
	timeWaitEnv    = "PROBED_NETNS_TIMEWAIT"
	timeWaitInside = "PROBED_NETNS_TIMEWAIT_INSIDE"
)

// TestLingeringConnectsInTimeWait (PROBED_NETNS_TIMEWAIT=90s) reproduces
// a measurement of issue 31's 10,000-pod run (docs/decisions.md, "the
// 10,000-pod stand-in"): in a network namespace of its own, with the pod
// range on its loopback and one listener for every address, 1,000
// connects a second to 10,000 pod IPs, each closed at once with
// kubelet's SO_LINGER{on, 1 s} as probed's tcpSocket probes do. Every
// socket then spends a minute in TIME_WAIT (the linger does not shorten
// it); the test logs how many and fails if any connect failed or took
// more than 100 ms: TIME_WAIT alone does not make connects time out.
func TestLingeringConnectsInTimeWait(t *testing.T) {
	v := os.Getenv(timeWaitEnv)
	if v == "" {
		t.Skip(timeWaitEnv + "=<duration> runs it (90s reproduces the measurement)")
	}
	window, err := time.ParseDuration(v)
	if err != nil || window <= 0 {
		t.Fatalf("%s=%q: want a positive duration", timeWaitEnv, v)
	}
	if !netns.Inside(timeWaitInside) {
		code, err := netns.Reexec(timeWaitInside)
		if err != nil {
			t.Skip(err)
		}
		if code != 0 {
			t.Fatalf("the run inside the namespace failed (exit %d)", code)
		}
		return
	}
	if err := netns.SetUpLoopback("10.244.0.1/16"); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	var wg sync.WaitGroup
	defer wg.Wait()
	defer lis.Close()
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			switch {
			case errors.Is(err, net.ErrClosed):
				return
			case err != nil:
				// A failed accept counts against the test through
				// the connects it leaves waiting.
				time.Sleep(5 * time.Millisecond)
				continue
			}
			wg.Go(func() {
				_, _ = io.Copy(io.Discard, c)
				_ = c.Close()
			})
		}
	})
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
		}); err != nil {
			return err
		}
		return serr
	}}
	const pods, rate = 10000, 1000
	var ok, failed, slow atomic.Int64
	var slowest atomic.Int64
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	end := time.Now().Add(window)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		addr := fmt.Sprintf("10.244.%d.%d:%d", 1+i%pods/250, 2+i%pods%250, port)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			c, err := dialer.DialContext(ctx, "tcp", addr)
			took := time.Since(start)
			if err != nil {
				failed.Add(1)
				return
			}
			_ = c.Close()
			ok.Add(1)
			if took > 100*time.Millisecond {
				slow.Add(1)
			}
			for {
				s := slowest.Load()
				if int64(took) <= s || slowest.CompareAndSwap(s, int64(took)) {
					break
				}
			}
		})
	}
	timeWait, err := countTimeWait()
	if err != nil {
		t.Fatal(err)
	}
	sent := ok.Load() + failed.Load()
	t.Logf("%d connects in %v (%.0f a second, to %d pod IPs): %d failed, %d over 100 ms, the slowest %v; %d sockets in TIME_WAIT",
		sent, window, float64(sent)/window.Seconds(), pods, failed.Load(), slow.Load(), time.Duration(slowest.Load()), timeWait)
	if failed.Load() > 0 || slow.Load() > 0 {
		t.Errorf("%d connects failed and %d took over 100 ms beside %d sockets in TIME_WAIT", failed.Load(), slow.Load(), timeWait)
	}
}

// countTimeWait counts the IPv4 TCP sockets in TIME_WAIT (state 06 of
// /proc/net/tcp) of this network namespace.
func countTimeWait() (int, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 3 && fields[3] == "06" {
			n++
		}
	}
	return n, s.Err()
}
