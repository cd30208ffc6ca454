package main

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// point is one (x, y) of a series.
type point struct{ x, y float64 }

// chartSeries is one line of a chart.
type chartSeries struct {
	name   string
	dashed bool
	color  string // "" for the palette's colour of the series' index
	points []point
}

// chart is a line chart the benchmarks write as a standalone SVG file, so
// that their figures come with a plot made by the same code that
// measured them.
type chart struct {
	title, xLabel, yLabel string
	logX                  bool    // logarithmic x axis (x values must be positive)
	step                  bool    // draw each series as a step function (a CDF)
	marks                 bool    // a dot at each point
	yMax                  float64 // top of the y axis; 0: from the data
	series                []chartSeries
}

// Layout of the SVG, in pixels.
const (
	svgWidth       = 820
	svgPlotHeight  = 380
	svgLeft        = 80
	svgRight       = 30
	svgTop         = 44
	svgAxisSpace   = 56 // below the plot: tick labels and the x label
	svgLegendEntry = 20
)

// palette colours the series in order.
var palette = []string{"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f"}

// writeSVG writes the chart as an SVG document.
func (c chart) writeSVG(w io.Writer) error { return writeSVGPanels(w, c) }

// writeSVGPanels writes charts one above the other as one SVG document.
func writeSVGPanels(w io.Writer, charts ...chart) error {
	bw := bufio.NewWriter(w)
	height := 0
	for _, c := range charts {
		height += c.height()
	}
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	y := 0
	for _, c := range charts {
		fmt.Fprintf(bw, `<g transform="translate(0 %d)">`+"\n", y)
		c.writeBody(bw)
		fmt.Fprintln(bw, "</g>")
		y += c.height()
	}
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

// height is the height of the chart in pixels: title, plot, axis and
// legend.
func (c chart) height() int {
	return svgTop + svgPlotHeight + svgAxisSpace + svgLegendEntry*len(c.series) + 10
}

// writeBody writes the elements of the chart, its top left corner at the
// origin.
func (c chart) writeBody(bw *bufio.Writer) {
	xmin, xmax, ymax := c.bounds()
	plotW := float64(svgWidth - svgLeft - svgRight)
	sx := func(x float64) float64 {
		if c.logX {
			x = math.Max(x, xmin)
			return svgLeft + plotW*(math.Log10(x)-math.Log10(xmin))/(math.Log10(xmax)-math.Log10(xmin))
		}
		return svgLeft + plotW*(x-xmin)/(xmax-xmin)
	}
	sy := func(y float64) float64 {
		return svgTop + svgPlotHeight*(1-math.Min(y, ymax)/ymax)
	}
	esc := html.EscapeString
	fmt.Fprintf(bw, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", svgLeft, esc(c.title))

	// Grid and ticks.
	for _, y := range linearTicks(0, ymax) {
		py := sy(y)
		fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/>`+"\n", svgLeft, py, svgWidth-svgRight, py)
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", svgLeft-6, py+4, esc(tickLabel(y)))
	}
	xt := linearTicks(xmin, xmax)
	if c.logX {
		xt = logTicks(xmin, xmax)
	}
	for _, x := range xt {
		px := sx(x)
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e0e0e0"/>`+"\n", px, svgTop, px, svgTop+svgPlotHeight)
		fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px, svgTop+svgPlotHeight+16, esc(tickLabel(x)))
	}
	fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%.0f" height="%d" fill="none" stroke="#404040"/>`+"\n", svgLeft, svgTop, plotW, svgPlotHeight)
	fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", svgLeft+plotW/2, svgTop+svgPlotHeight+38, esc(c.xLabel))
	fmt.Fprintf(bw, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", svgTop+svgPlotHeight/2.0, esc(c.yLabel))

	// Series and legend.
	for i, s := range c.series {
		color := s.color
		if color == "" {
			color = palette[i%len(palette)]
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		if len(s.points) > 0 {
			fmt.Fprintf(bw, `<path d="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", c.path(s.points, sx, sy), color, dash)
		}
		if c.marks {
			for _, p := range s.points {
				fmt.Fprintf(bw, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", sx(p.x), sy(p.y), color)
			}
		}
		ly := svgTop + svgPlotHeight + svgAxisSpace + svgLegendEntry*i + 6
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", svgLeft, ly, svgLeft+30, ly, color, dash)
		fmt.Fprintf(bw, `<text x="%d" y="%d">%s</text>`+"\n", svgLeft+38, ly+4, esc(s.name))
	}
}

// bounds returns the axis ranges: x from the data (whole decades on a log
// axis), y from 0 to a round number above the largest value.
func (c chart) bounds() (xmin, xmax, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, s := range c.series {
		for _, p := range s.points {
			if c.logX && p.x <= 0 {
				continue
			}
			xmin, xmax = math.Min(xmin, p.x), math.Max(xmax, p.x)
			ymax = math.Max(ymax, p.y)
		}
	}
	if math.IsInf(xmin, 1) {
		xmin, xmax = 1, 10
	}
	if c.logX {
		xmin, xmax = logFloor(xmin), logCeil(xmax)
		if xmax <= xmin {
			xmax = logCeil(xmin * 1.01)
		}
	} else if xmax <= xmin {
		xmax = xmin + 1
	}
	if c.yMax > 0 {
		return xmin, xmax, c.yMax
	}
	if ymax <= 0 {
		ymax = 1
	}
	step := niceStep(ymax / 5)
	return xmin, xmax, math.Ceil(ymax*1.02/step) * step
}

// logFloor returns the largest 1, 2 or 5 times a power of ten at most v
// (v > 0); logCeil the smallest at least v.
func logFloor(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{5, 2, 1} {
		if m*e <= v*(1+1e-9) {
			return m * e
		}
	}
	return e
}

func logCeil(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= v*(1-1e-9) {
			return m * e
		}
	}
	return 10 * e
}

// path is the SVG path of points: straight segments, or steps for a CDF
// (from 0 up to the first point, then across and up).
func (c chart) path(points []point, sx, sy func(float64) float64) string {
	var b strings.Builder
	if c.step {
		fmt.Fprintf(&b, "M%.1f %.1f", sx(points[0].x), sy(0))
		for i, p := range points {
			if i > 0 {
				fmt.Fprintf(&b, "H%.1f", sx(p.x))
			}
			fmt.Fprintf(&b, "V%.1f", sy(p.y))
		}
		return b.String()
	}
	for i, p := range points {
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&b, "%s%.1f %.1f", cmd, sx(p.x), sy(p.y))
	}
	return b.String()
}

// niceStep rounds r up to 1, 2 or 5 times a power of ten.
func niceStep(r float64) float64 {
	if r <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(r)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= r {
			return m * e
		}
	}
	return 10 * e
}

// linearTicks returns about five round values from lo to hi.
func linearTicks(lo, hi float64) []float64 {
	step := niceStep((hi - lo) / 5)
	// step is m × 10^e; k·m / 10^-e is the double nearest to the round
	// value (0.6, not 3 × 0.2 = 0.6000000000000001).
	e := math.Floor(math.Log10(step))
	m := math.Round(step / math.Pow(10, e))
	at := func(k float64) float64 {
		if e < 0 {
			return k * m / math.Pow(10, -e)
		}
		return k * m * math.Pow(10, e)
	}
	var out []float64
	for k := math.Ceil(lo / step); at(k) <= hi+step/1e6; k++ {
		out = append(out, at(k))
	}
	return out
}

// logTicks returns 1, 2 and 5 times the powers of ten from lo to hi.
func logTicks(lo, hi float64) []float64 {
	var out []float64
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
				out = append(out, v)
			}
		}
	}
	return slices.Compact(out)
}

// tickLabel formats a tick value compactly: 0.5, 2, 1000, 10000.
func tickLabel(v float64) string {
	// Six significant digits drop the float noise of 3 × 0.1.
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	if err != nil {
		r = v
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}
