package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestBackendAnswers(t *testing.T) {
	b, err := startBackend(3, backendUp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.close() })
	b.flip(1, backendDown)
	b.flip(2, backendFlap)
	get := func(path string) int {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", b.port, path))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		name string
		path string
		want []int // answers to consecutive requests
	}{
		{"up", "/t/0", []int{200, 200, 200}},
		{"down", "/t/1", []int{503, 503}},
		{"flapping", "/t/2", []int{503, 200, 503, 200}},
		{"unknown target", "/t/3", []int{404}},
		{"not a target", "/healthz", []int{404}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, want := range tt.want {
				if got := get(tt.path); got != want {
					t.Errorf("request %d to %s: %d, want %d", k+1, tt.path, got, want)
				}
			}
		})
	}
	if got := b.requests(2); got != 4 {
		t.Errorf("requests(2) = %d, want 4", got)
	}
}

func TestBackendTimesTheFirstRequestSinceAMark(t *testing.T) {
	b := &backend{targets: make([]backendTarget, 1)}
	base := time.Unix(1000, 0)
	b.markFrom(0, base)
	if _, ok := b.firstSince(0); ok {
		t.Fatal("firstSince before any request: ok")
	}
	b.targets[0].serve(base.Add(-time.Millisecond).UnixNano()) // before the mark: a probe of the killed replica
	if _, ok := b.firstSince(0); ok {
		t.Fatal("a request before the mark counted")
	}
	b.targets[0].serve(base.Add(5 * time.Millisecond).UnixNano())
	b.targets[0].serve(base.Add(9 * time.Millisecond).UnixNano())
	got, ok := b.firstSince(0)
	if !ok || !got.Equal(base.Add(5*time.Millisecond)) {
		t.Errorf("firstSince = %v, %v; want the first request after the mark, %v", got, ok, base.Add(5*time.Millisecond))
	}
	b.markFrom(0, base.Add(time.Second))
	if _, ok := b.firstSince(0); ok {
		t.Error("a new mark kept the previous first request")
	}
}

func TestBackendTarget(t *testing.T) {
	b := &backend{port: 4242}
	tg := b.target("c-00007", 7, 250*time.Millisecond, clusterLabel)
	p := tg.GetReadinessProbe()
	h := p.GetHttpGet()
	if h.GetPath() != "/t/7" || h.GetPort() != 4242 || h.GetHost() != "127.0.0.1" {
		t.Errorf("probe %v, want GET 127.0.0.1:4242/t/7", h)
	}
	if p.GetSuccessThreshold() != 1 || p.GetFailureThreshold() != 1 {
		t.Errorf("thresholds %d/%d, want 1/1 (every flip one transition)", p.GetSuccessThreshold(), p.GetFailureThreshold())
	}
	// 0 seconds means the default (10s), so 250ms is 1s - 750ms.
	if p.GetPeriodSeconds() != 1 || p.GetPeriodMilliseconds() != -750 {
		t.Errorf("period %ds + %dms, want 1s - 750ms", p.GetPeriodSeconds(), p.GetPeriodMilliseconds())
	}
	if tg.GetLabels()["probed-bench"] != "cluster" {
		t.Errorf("labels %v", tg.GetLabels())
	}
}
