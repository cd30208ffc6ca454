package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScaleMix(t *testing.T) {
	tests := []struct {
		name            string
		n               int
		http, keepAlive float64
		limit           int
		want            scaleMix
	}{
		{name: "even", n: 1000, http: 0.5, keepAlive: 0.5, want: scaleMix{HTTPKeepAlive: 250, HTTPNewConnection: 250, TCP: 500}},
		{name: "odd", n: 7, http: 0.5, keepAlive: 0.5, want: scaleMix{HTTPKeepAlive: 2, HTTPNewConnection: 2, TCP: 3}},
		{name: "one", n: 1, http: 0.5, keepAlive: 0.5, want: scaleMix{HTTPKeepAlive: 1}},
		{name: "TCP only", n: 10, http: 0, keepAlive: 0.5, want: scaleMix{TCP: 10}},
		{name: "HTTP only, all kept alive", n: 10, http: 1, keepAlive: 1, want: scaleMix{HTTPKeepAlive: 10}},
		{name: "uneven shares", n: 1000, http: 0.3, keepAlive: 0.1, want: scaleMix{HTTPKeepAlive: 30, HTTPNewConnection: 270, TCP: 700}},
		{name: "under the limit", n: 1000, http: 0.5, keepAlive: 0.5, limit: 300, want: scaleMix{HTTPKeepAlive: 250, HTTPNewConnection: 250, TCP: 500}},
		{name: "over the limit", n: 100_000, http: 0.5, keepAlive: 0.5, limit: 17_000,
			want: scaleMix{HTTPKeepAlive: 17_000, HTTPNewConnection: 33_000, TCP: 50_000, KeepAliveLimit: 17_000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newScaleMix(tt.n, tt.http, tt.keepAlive, tt.limit)
			if m != tt.want {
				t.Fatalf("newScaleMix(%d, %v, %v, %d) = %+v, want %+v", tt.n, tt.http, tt.keepAlive, tt.limit, m, tt.want)
			}
			var got scaleMix
			for i := range tt.n {
				switch http, keepAlive := m.kind(i); {
				case !http:
					got.TCP++
				case keepAlive:
					got.HTTPKeepAlive++
				default:
					got.HTTPNewConnection++
				}
			}
			got.KeepAliveLimit = m.KeepAliveLimit
			if got != m {
				t.Errorf("kind() over %d targets counts %+v, want %+v", tt.n, got, m)
			}
		})
	}
}

func TestScaleTarget(t *testing.T) {
	m := newScaleMix(4, 0.5, 0.5, 0) // TCP, HTTP kept alive, TCP, HTTP new connection
	tests := []struct {
		i          int
		wantHTTP   bool
		wantNoKeep bool
	}{{0, false, false}, {1, true, false}, {2, false, false}, {3, true, true}}
	for _, tt := range tests {
		tg := scaleTarget(tt.i, m, 8080, 10_000_000_000)
		p := tg.GetReadinessProbe()
		if got := p.GetHttpGet() != nil; got != tt.wantHTTP {
			t.Errorf("target %d: HTTP = %v, want %v", tt.i, got, tt.wantHTTP)
		}
		if !tt.wantHTTP && p.GetTcpSocket().GetPort() != 8080 {
			t.Errorf("target %d: %v, want a TCP probe of port 8080", tt.i, p)
		}
		if p.GetHttpGet().GetDisableKeepAlive() != tt.wantNoKeep {
			t.Errorf("target %d: disableKeepAlive = %v, want %v", tt.i, p.GetHttpGet().GetDisableKeepAlive(), tt.wantNoKeep)
		}
		if p.GetPeriodSeconds() != 10 || p.PeriodMilliseconds != nil || !strings.HasPrefix(tg.GetName(), "scale-") {
			t.Errorf("target %d: %v, want scale-… every 10s", tt.i, tg)
		}
	}
}

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

func TestScaleCompare(t *testing.T) {
	r := scaleReport{Targets: 1000, Mix: newScaleMix(1000, 0.5, 0.5, 0), RegistrationsPerSecond: 2000, Fresh: scaleState{Goroutines: 600}}
	before := r
	before.RegistrationsPerSecond, before.Fresh.Goroutines = 1000, 1200
	var out bytes.Buffer
	if err := printScaleTable(&out, scaleConfig{period: 10_000_000_000}, r, &before); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--compare", "registrations/s", "2000", "1000", "2.00x", "goroutines", "0.50x"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	// --compare reads what --json printed last, after the tables: one
	// report or several.
	dir := t.TempDir()
	for name, content := range map[string]string{
		"one.txt":  "scale: a table\n\n" + `{"targets":1000,"fresh":{"goroutines":1200}}` + "\n",
		"many.txt": `[{"targets":10},{"targets":1000,"fresh":{"goroutines":1200}}]`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		rs, err := readScaleReports(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := findScaleReport(rs, 1000); got == nil || got.Fresh.Goroutines != 1200 {
			t.Errorf("%s: report of 1000 targets = %+v, want the one with 1200 goroutines", name, got)
		}
		if findScaleReport(rs, 5) != nil {
			t.Errorf("%s: found a report of 5 targets", name)
		}
	}
	if _, err := readScaleReports(filepath.Join(dir, "nope")); err == nil {
		t.Error("readScaleReports of a missing file: no error")
	}
}

// TestScaleChartsAreSVG checks that the two panels are one well-formed
// SVG document with one path per series.
func TestScaleChartsAreSVG(t *testing.T) {
	reports := []scaleReport{
		{Targets: 1000, BaseRSSBytes: 20 << 20, Fresh: scaleState{RSSBytes: 40 << 20, Goroutines: 600}, Restarted: scaleState{RSSBytes: 38 << 20, Goroutines: 590}},
		{Targets: 10_000, BaseRSSBytes: 20 << 20, Fresh: scaleState{RSSBytes: 140 << 20, Goroutines: 5100}, Restarted: scaleState{RSSBytes: 150 << 20, Goroutines: 5000}},
	}
	charts := scaleCharts(reports)
	var buf bytes.Buffer
	if err := writeSVGPanels(&buf, charts...); err != nil {
		t.Fatal(err)
	}
	if counts := svgElements(t, &buf); counts["svg"] != 1 || counts["g"] != 2 || counts["path"] != 6 {
		t.Errorf("elements %v, want 1 svg, 2 panels (g), 6 paths (3 series each)", counts)
	}
}

func TestScaleReplot(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "run.json"), filepath.Join(dir, "plot.svg")
	report := `[{"targets":1000,"period_ms":10000,"mix":{"http_keep_alive":250,"http_new_connection":250,"tcp":500},"fresh":{"rss_bytes":50000000,"goroutines":600}},` +
		`{"targets":100000,"period_ms":10000,"mix":{"http_keep_alive":17000,"http_new_connection":33000,"tcp":50000,"keep_alive_limit":17000},"fresh":{"rss_bytes":1500000000,"goroutines":34000}}]`
	if err := os.WriteFile(in, []byte(report), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"scale", "--replot", in}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "--replot needs --svg") {
		t.Errorf("--replot without --svg: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run(t.Context(), []string{"scale", "--replot", in, "--svg", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("--replot: exit %d, stderr %q", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"probe every 10s, 50% HTTP (50% of those kept alive)", "at 100000, 17000 kept alive"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("plot lacks %q", want)
		}
	}
}
