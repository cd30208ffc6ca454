package probedtest

import (
	"net"
	"sync"
	"testing"
)

// Accepting returns the port of a TCP listener on 127.0.0.1 that accepts
// connections and closes them at once: a target for TCP probes that
// succeed. It stops, and its goroutine is waited for, when the test ends.
func Accepting(t testing.TB) int32 {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	})
	t.Cleanup(func() {
		_ = lis.Close()
		wg.Wait()
	})
	return int32(lis.Addr().(*net.TCPAddr).Port)
}
