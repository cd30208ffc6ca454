package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"testing"
	"time"
)

// TestChartsAreSVG: each plot the benchmarks write is one well-formed SVG
// document that names its title and every series (in the legend).
func TestChartsAreSVG(t *testing.T) {
	keep := newE2EResult(time.Second, 1000, 1000, time.Second, 1)
	e2e := []e2eReport{
		newE2EReport(100, time.Second, keep, keep, keep, keep),
		newE2EReport(1000, time.Second, keep, keep, keep, keep),
	}
	cold := []coldSamples{{period: 50 * time.Millisecond, detect: []time.Duration{0, time.Millisecond}, start: []time.Duration{time.Millisecond, 30 * time.Millisecond}}}
	scale := []scaleReport{
		{Targets: 1000, BaseRSSBytes: 20 << 20, Fresh: scaleState{RSSBytes: 40 << 20, Goroutines: 600}, Restarted: scaleState{RSSBytes: 38 << 20, Goroutines: 590}},
		{Targets: 10_000, BaseRSSBytes: 20 << 20, Fresh: scaleState{RSSBytes: 140 << 20, Goroutines: 5100}, Restarted: scaleState{RSSBytes: 150 << 20, Goroutines: 5000}},
	}
	tests := []struct {
		name   string
		charts []chart
	}{
		{name: "e2e", charts: []chart{e2eChart(e2eConfig{period: time.Second}, e2e)}},
		{name: "coldstart", charts: []chart{coldChart(coldConfig{runs: 2}, cold)}},
		{name: "scale, two panels", charts: scaleCharts(scale)},
		{name: "no points", charts: []chart{{title: "empty", logX: true, series: []chartSeries{{name: "none"}}}}},
		{name: "one x, log axis", charts: []chart{{title: "one", logX: true, marks: true, series: []chartSeries{{name: "a", points: []point{{3, 1}}}}}}},
		{name: "one x, linear axis", charts: []chart{{title: "one", series: []chartSeries{{name: "a", points: []point{{3, 1}, {3, 2}}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeSVGPanels(&buf, tt.charts...); err != nil {
				t.Fatal(err)
			}
			root, texts := svgTexts(t, &buf)
			if root != "svg" {
				t.Errorf("root element %q, want svg", root)
			}
			for _, c := range tt.charts {
				want := []string{c.title}
				for _, s := range c.series {
					if len(s.points) > 0 {
						want = append(want, s.name)
					}
				}
				for _, w := range want {
					if !slices.Contains(texts, w) {
						t.Errorf("no text %q in the SVG; texts: %q", w, texts)
					}
				}
			}
		})
	}
}

// svgTexts parses an XML document and returns the name of its root
// element and the content of its text elements.
func svgTexts(t *testing.T, r io.Reader) (root string, texts []string) {
	t.Helper()
	dec := xml.NewDecoder(r)
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return root, texts
		}
		if err != nil {
			t.Fatalf("not XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			inText = tok.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
}
