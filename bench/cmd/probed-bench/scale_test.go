package main

import (
	"testing"
)

func TestNumberedPath(t *testing.T) {
	tests := map[string]string{
		"heap.pb.gz":     "heap-1000.pb.gz",
		"/tmp/d/heap":    "/tmp/d/heap-1000",
		"dir.x/heap.out": "dir.x/heap-1000.out",
	}
	for in, want := range tests {
		if got := numberedPath(in, 1000); got != want {
			t.Errorf("numberedPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKeepAliveLimit(t *testing.T) {
	all, err := keepAliveLimit(0)
	if err != nil {
		t.Fatal(err)
	}
	if all == 0 {
		t.Skip("no file descriptor limit here")
	}
	for _, margin := range []int{0, 3000, all - 1} {
		if got, err := keepAliveLimit(margin); err != nil || got != all-margin {
			t.Errorf("keepAliveLimit(%d) = %d, %v; want %d (the hard limit %d minus the margin)", margin, got, err, all-margin, all)
		}
	}
	if got, err := keepAliveLimit(all); err == nil {
		t.Errorf("keepAliveLimit(the whole limit) = %d, want an error", got)
	}
}
