package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScaleCompare(t *testing.T) {
	r := scaleReport{Targets: 1000, Mix: newScaleMix(1000, mixShares{http: 0.5, keepAlive: 0.5}, 0), RegistrationsPerSecond: 2000, Fresh: scaleState{Goroutines: 600}}
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
	for _, want := range []string{"probe every 10s; at 1000 targets: 250 HTTP kept alive, 250 HTTP new connection, 500 TCP", "at 100000, 17000 kept alive"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("plot lacks %q", want)
		}
	}
}
