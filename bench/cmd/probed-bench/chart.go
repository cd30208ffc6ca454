package main

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// point is one (x, y) of a series.
type point struct{ x, y float64 }

// chartSeries is one line of a chart.
type chartSeries struct {
	name   string
	dashed bool
	color  color.Color // nil for the palette's colour of the series' index
	points []point
}

// chart is a line chart the benchmarks write as a standalone SVG file
// (drawn by gonum/plot), so that their figures come with a plot made by
// the same code that measured them.
type chart struct {
	title, xLabel, yLabel string
	logX                  bool    // logarithmic x axis (points at x ≤ 0 are left out)
	step                  bool    // draw each series as a step function (a CDF)
	marks                 bool    // a dot at each point
	yMax                  float64 // the largest y value (100 for a percentage); 0: from the data
	series                []chartSeries
}

// The size of one chart.
const (
	chartWidth  = 8.5 * vg.Inch
	chartHeight = 5.5 * vg.Inch
)

// palette colours the series in order.
var palette = []color.Color{
	rgb(0xd62728), rgb(0x1f77b4), rgb(0x2ca02c), rgb(0xff7f0e),
	rgb(0x9467bd), rgb(0x8c564b), rgb(0x17becf), rgb(0x7f7f7f),
}

func rgb(v uint32) color.Color {
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

// writeSVG writes the chart as an SVG document.
func (c chart) writeSVG(w io.Writer) error { return writeSVGPanels(w, c) }

// writeSVGPanels writes charts one above the other as one SVG document.
func writeSVGPanels(w io.Writer, charts ...chart) error {
	plots := make([][]*plot.Plot, len(charts))
	for i, c := range charts {
		p, err := c.plot()
		if err != nil {
			return fmt.Errorf("chart %q: %w", c.title, err)
		}
		plots[i] = []*plot.Plot{p}
	}
	canvas := vgsvg.New(chartWidth, chartHeight*vg.Length(len(charts)))
	tiles := draw.Tiles{Rows: len(charts), Cols: 1, PadY: vg.Points(12)}
	for i, row := range plot.Align(plots, tiles, draw.New(canvas)) {
		plots[i][0].Draw(row[0])
	}
	_, err := canvas.WriteTo(w)
	return err
}

// plot makes the chart's gonum plot: grid, axes, a line (and marks) per
// series, and a legend naming them.
func (c chart) plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.X.Label.Text, p.Y.Label.Text = c.xLabel, c.yLabel
	if c.logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	ymax, xmin, xmax := 0.0, math.Inf(1), math.Inf(-1)
	for i, s := range c.series {
		xys := make(plotter.XYs, 0, len(s.points)+1)
		for _, pt := range s.points {
			if c.logX && pt.x <= 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: pt.x, Y: pt.y})
			ymax = math.Max(ymax, pt.y)
			xmin, xmax = math.Min(xmin, pt.x), math.Max(xmax, pt.x)
		}
		if len(xys) == 0 {
			continue
		}
		if c.step {
			// From 0 up to the first point, then across and up.
			xys = append(plotter.XYs{{X: xys[0].X, Y: 0}}, xys...)
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		col := s.color
		if col == nil {
			col = palette[i%len(palette)]
		}
		line.Color, line.Width = col, vg.Points(1.5)
		if s.dashed {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		}
		if c.step {
			line.StepStyle = plotter.PostStep
		}
		p.Add(line)
		if c.marks {
			dots, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, err
			}
			dots.Shape, dots.Color, dots.Radius = draw.CircleGlyph{}, col, vg.Points(2.5)
			p.Add(dots)
		}
		p.Legend.Add(s.name, line)
	}
	// An axis needs a range: around a single x, or any with no points (a
	// log axis cannot hold 0).
	switch {
	case xmin > xmax && c.logX:
		p.X.Min, p.X.Max = 1, 10
	case xmin > xmax:
		p.X.Min, p.X.Max = 0, 1
	case xmin == xmax && c.logX:
		p.X.Min, p.X.Max = xmin/2, xmin*2
	case xmin == xmax:
		p.X.Min, p.X.Max = xmin-1, xmin+1
	}
	top := c.yMax
	if top <= 0 {
		top = ymax
	}
	if top <= 0 {
		top = 1
	}
	// Room above the top for the legend, one line per series.
	p.Y.Min, p.Y.Max = 0, top*(1.05+0.07*float64(len(c.series)))
	return p, nil
}
