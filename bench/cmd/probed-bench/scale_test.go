package main

import (
	"testing"
)

func TestNumberedPath(t *testing.T) {
	tests := []struct {
		name, path, suffix, want string
	}{
		{"extension", "heap.pb.gz", "", "heap-1000.pb.gz"},
		{"no extension", "/tmp/d/heap", "", "/tmp/d/heap-1000"},
		{"dot in the directory", "dir.x/heap.out", "", "dir.x/heap-1000.out"},
		{"suffix", "heap.pb.gz", "-restarted", "heap-1000-restarted.pb.gz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := numberedPath(tt.path, 1000, tt.suffix); got != tt.want {
				t.Errorf("numberedPath(%q, 1000, %q) = %q, want %q", tt.path, tt.suffix, got, tt.want)
			}
		})
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
