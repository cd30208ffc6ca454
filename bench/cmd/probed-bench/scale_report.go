package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"text/tabwriter"
	"time"
)

// scaleState is what a probed holding the targets costs, measured at the
// end of a window.
type scaleState struct {
	RSSBytes          int64   `json:"rss_bytes"`
	RSSBytesPerTarget float64 `json:"rss_bytes_per_target"` // (RSS - the empty server's) / targets
	// RSSAnonBytes and RSSFileBytes split RSSBytes: anonymous memory (heap,
	// stacks) and mapped files (the binary, and the pages of the bbolt
	// file that probed has touched, which the kernel may drop).
	RSSAnonBytes   int64 `json:"rss_anon_bytes"`
	RSSFileBytes   int64 `json:"rss_file_bytes"`
	PeakRSSBytes   int64 `json:"peak_rss_bytes"` // over the process's life
	HeapInuseBytes int64 `json:"heap_inuse_bytes"`
	// LiveHeapBytes is the heap allocated after a collection (with
	// --heap-profile, which forces one after the window; 0 without).
	LiveHeapBytes   int64 `json:"live_heap_bytes,omitempty"`
	StackInuseBytes int64 `json:"stack_inuse_bytes"`
	Goroutines      int   `json:"goroutines"`
	// GoroutinesAboveEmpty is Goroutines less the empty server's at its
	// start: what the targets cost.
	GoroutinesAboveEmpty int     `json:"goroutines_above_empty"`
	ProbesInflight       int     `json:"probes_inflight"`
	ProbesPerSecond      float64 `json:"probes_per_second"` // over the window
	ProbesFailed         int64   `json:"probes_failed"`     // over the window
	CPUUsPerProbe        float64 `json:"cpu_us_per_probe"`  // over the window
}

// scaleList is the cost of listing every target, page after page.
type scaleList struct {
	Seconds     float64 `json:"seconds"`
	Pages       int     `json:"pages"`
	Targets     int     `json:"targets"`
	FirstPageMs float64 `json:"first_page_ms"`
	MaxPageMs   float64 `json:"max_page_ms"`
}

// scaleReport is the result for one number of targets.
type scaleReport struct {
	Targets  int      `json:"targets"`
	PeriodMs float64  `json:"period_ms"`
	Mix      scaleMix `json:"mix"`
	// RegistrationsPerSecond: targets / the time to create them all with
	// Workers concurrent calls.
	RegistrationsPerSecond float64    `json:"registrations_per_second"`
	RegistrationSeconds    float64    `json:"registration_seconds"`
	Workers                int        `json:"workers"`
	BaseRSSBytes           int64      `json:"base_rss_bytes"`  // the empty server, at start
	BaseGoroutines         int        `json:"base_goroutines"` // the empty server's, at start
	StartupSeconds         float64    `json:"startup_seconds"`
	Fresh                  scaleState `json:"fresh"`
	List                   scaleList  `json:"list"`
	// RestartSeconds is the restart to serving: from the exec of the new
	// process to its first answered call (store opened and loaded, targets
	// restored, listening); StopSeconds the graceful stop before it.
	StopSeconds    float64    `json:"stop_seconds"`
	RestartSeconds float64    `json:"restart_seconds"`
	Restarted      scaleState `json:"restarted"`
	// LoadAverage is the machine's 1-minute load average at the start and
	// at the end of the run: on a shared machine, the timings (not the
	// memory) depend on it.
	LoadAverage [2]float64 `json:"load_average"`
}

// readScaleReports reads the reports of an earlier run: the JSON the
// command prints last (one object or an array), possibly after its tables.
func readScaleReports(path string) ([]scaleReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	line := lastLine(b)
	var many []scaleReport
	if err := json.Unmarshal(line, &many); err == nil {
		return many, nil
	}
	var one scaleReport
	if err := json.Unmarshal(line, &one); err != nil {
		return nil, fmt.Errorf("%s: the last line is not a scale report: %w", path, err)
	}
	return []scaleReport{one}, nil
}

// findScaleReport returns the report of n targets in rs, or nil.
func findScaleReport(rs []scaleReport, n int) *scaleReport {
	for i := range rs {
		if rs[i].Targets == n {
			return &rs[i]
		}
	}
	return nil
}

// printScaleTable prints one report, beside the earlier one if any.
func printScaleTable(w io.Writer, cfg scaleConfig, r scaleReport, before *scaleReport) error {
	fmt.Fprintf(w, "scale: %d targets (%s) every %v, GOMAXPROCS %d, load average %.1f → %.1f\n\n",
		r.Targets, r.Mix, cfg.period, runtime.GOMAXPROCS(0), r.LoadAverage[0], r.LoadAverage[1])
	kib := func(b float64) float64 { return b / 1024 }
	rows := []struct {
		name string
		get  func(scaleReport) float64
		prec int
	}{
		{"registrations/s", func(r scaleReport) float64 { return r.RegistrationsPerSecond }, 0},
		{"empty server RSS MiB", func(r scaleReport) float64 { return mib(r.BaseRSSBytes) }, 1},
		{"RSS MiB", func(r scaleReport) float64 { return mib(r.Fresh.RSSBytes) }, 1},
		{"RSS KiB per target", func(r scaleReport) float64 { return kib(r.Fresh.RSSBytesPerTarget) }, 2},
		{"  anonymous MiB", func(r scaleReport) float64 { return mib(r.Fresh.RSSAnonBytes) }, 1},
		{"  mapped files MiB", func(r scaleReport) float64 { return mib(r.Fresh.RSSFileBytes) }, 1},
		{"peak RSS MiB", func(r scaleReport) float64 { return mib(r.Fresh.PeakRSSBytes) }, 1},
		{"heap in use MiB", func(r scaleReport) float64 { return mib(r.Fresh.HeapInuseBytes) }, 1},
		{"live heap B per target", func(r scaleReport) float64 { return float64(r.Fresh.LiveHeapBytes) / float64(r.Targets) }, 0},
		{"stacks MiB", func(r scaleReport) float64 { return mib(r.Fresh.StackInuseBytes) }, 1},
		{"goroutines", func(r scaleReport) float64 { return float64(r.Fresh.Goroutines) }, 0},
		{"  above the empty server's", func(r scaleReport) float64 { return float64(r.Fresh.GoroutinesAboveEmpty) }, 0},
		{"probes in flight", func(r scaleReport) float64 { return float64(r.Fresh.ProbesInflight) }, 0},
		{"probes/s", func(r scaleReport) float64 { return r.Fresh.ProbesPerSecond }, 0},
		{"probes failed", func(r scaleReport) float64 { return float64(r.Fresh.ProbesFailed) }, 0},
		{"CPU µs per probe", func(r scaleReport) float64 { return r.Fresh.CPUUsPerProbe }, 1},
		{"list all s", func(r scaleReport) float64 { return r.List.Seconds }, 3},
		{"list first page ms", func(r scaleReport) float64 { return r.List.FirstPageMs }, 1},
		{"stop s", func(r scaleReport) float64 { return r.StopSeconds }, 3},
		{"restart to serving s", func(r scaleReport) float64 { return r.RestartSeconds }, 3},
		{"after restart: RSS MiB", func(r scaleReport) float64 { return mib(r.Restarted.RSSBytes) }, 1},
		{"after restart: KiB per target", func(r scaleReport) float64 { return kib(r.Restarted.RSSBytesPerTarget) }, 2},
		{"after restart: mapped files MiB", func(r scaleReport) float64 { return mib(r.Restarted.RSSFileBytes) }, 1},
		{"after restart: peak RSS MiB", func(r scaleReport) float64 { return mib(r.Restarted.PeakRSSBytes) }, 1},
		{"after restart: heap in use MiB", func(r scaleReport) float64 { return mib(r.Restarted.HeapInuseBytes) }, 1},
		{"after restart: live heap B per target", func(r scaleReport) float64 { return float64(r.Restarted.LiveHeapBytes) / float64(r.Targets) }, 0},
		{"after restart: goroutines", func(r scaleReport) float64 { return float64(r.Restarted.Goroutines) }, 0},
		{"  above the empty server's", func(r scaleReport) float64 { return float64(r.Restarted.GoroutinesAboveEmpty) }, 0},
		{"after restart: probes/s", func(r scaleReport) float64 { return r.Restarted.ProbesPerSecond }, 0},
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if before != nil {
		fmt.Fprintf(tw, "%-32s\tthis run\t--compare\tratio\t\n", "")
	}
	for _, row := range rows {
		v := row.get(r)
		if before == nil {
			fmt.Fprintf(tw, "%-32s\t%s\t\n", row.name, f(v, row.prec))
			continue
		}
		b := row.get(*before)
		fmt.Fprintf(tw, "%-32s\t%s\t%s\t%s\t\n", row.name, f(v, row.prec), f(b, row.prec), f(ratio(v, b), 2)+"x")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// scaleCharts plots RSS and goroutines against the number of targets.
// The period and the mix in the title are the first report's.
func scaleCharts(reports []scaleReport) []chart {
	rss := []chartSeries{{name: "fresh (after registration)"}, {name: "after a restart"}, {name: "goal: empty server + 3 KB per target", dashed: true}}
	gor := []chartSeries{{name: "fresh (after registration)"}, {name: "after a restart"}, {name: "goal: 4 × GOMAXPROCS + probes in flight", dashed: true}}
	for _, r := range reports {
		x := float64(r.Targets)
		rss[0].points = append(rss[0].points, point{x, mib(r.Fresh.RSSBytes)})
		rss[1].points = append(rss[1].points, point{x, mib(r.Restarted.RSSBytes)})
		rss[2].points = append(rss[2].points, point{x, mib(r.BaseRSSBytes + int64(r.Targets)*3000)})
		gor[0].points = append(gor[0].points, point{x, float64(r.Fresh.Goroutines)})
		gor[1].points = append(gor[1].points, point{x, float64(r.Restarted.Goroutines)})
		gor[2].points = append(gor[2].points, point{x, float64(4*runtime.GOMAXPROCS(0) + r.Fresh.ProbesInflight)})
	}
	xLabel := "targets"
	for _, r := range reports {
		if r.Mix.KeepAliveLimit > 0 {
			xLabel = fmt.Sprintf("targets (at %d, %d kept alive: the file descriptor limit)", r.Targets, r.Mix.HTTPKeepAlive)
		}
	}
	mixNote := ""
	if len(reports) > 0 {
		r := reports[0]
		mixNote = fmt.Sprintf(" (probe every %v; at %d targets: %s)", time.Duration(r.PeriodMs*float64(time.Millisecond)), r.Targets, r.Mix)
	}
	return []chart{
		{title: "probed RSS against targets" + mixNote, xLabel: xLabel, yLabel: "RSS MiB", logX: true, marks: true, series: rss},
		{title: "probed goroutines against targets", xLabel: xLabel, yLabel: "goroutines", logX: true, marks: true, series: gor},
	}
}
