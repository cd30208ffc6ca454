package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

func TestTargetPorts(t *testing.T) {
	if got, want := targetPorts([]int{7, 8, 9}, 5, 2), []int{7, 7, 8, 8, 9}; !slices.Equal(got, want) {
		t.Errorf("targetPorts = %v, want %v", got, want)
	}
	if got, want := targetPorts([]int{7, 8}, 2, 1), []int{7, 8}; !slices.Equal(got, want) {
		t.Errorf("targetPorts = %v, want %v", got, want)
	}
}

// TestSocketClient: the socket floor's client keeps its connection, tells
// a healthy answer from others and dials again after an error.
func TestSocketClient(t *testing.T) {
	var conns atomic.Int64
	status := atomic.Int64{}
	status.Store(http.StatusOK)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" || r.Header.Get("Accept") != "*/*" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.WriteHeader(int(status.Load()))
		_, _ = io.WriteString(w, targetBody)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	defer s.Close()
	c := newSocketClient(strings.TrimPrefix(s.URL, "http://"))
	for i := range 3 {
		if !c.get() {
			t.Fatalf("get %d failed", i)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("3 gets used %d connections, want 1", n)
	}
	status.Store(http.StatusServiceUnavailable)
	if c.get() {
		t.Error("a 503 counted as healthy")
	}
	status.Store(http.StatusOK)
	s.CloseClientConnections()
	_ = c.get() // fails on the closed connection, which it then drops
	if !c.get() {
		t.Error("no new connection after the server closed one")
	}
}
