package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// restartConfig is the restart subcommand's flags.
type restartConfig struct {
	targets   int
	period    time.Duration
	port      int
	rounds    int
	bins      []string
	workers   int
	settleMax time.Duration
}

func (c *restartConfig) register(fs *flag.FlagSet) {
	fs.IntVar(&c.targets, "targets", 1000, "targets in the data set")
	fs.DurationVar(&c.period, "period", 60*time.Second, "probe period of every target")
	fs.IntVar(&c.port, "port", 1, "loopback port every target probes (one that refuses connections, so that each target has had one transition)")
	fs.IntVar(&c.rounds, "rounds", 3, "restarts of each binary, alternated")
	fs.Func("probed-bin", "probed binaries to compare, comma-separated; the first one makes the data set (default: cmd/probed of this repository, built)", func(s string) error {
		c.bins = strings.Split(s, ",")
		return nil
	})
	fs.IntVar(&c.workers, "workers", 64, "concurrent CreateTarget calls while making the data set")
	fs.DurationVar(&c.settleMax, "settle-max", 0, "how long to wait for every target's first probe while making the data set (0: two periods and 30s)")
}

func (c *restartConfig) validate() error {
	switch {
	case c.targets < 1, c.rounds < 1, c.workers < 1:
		return errors.New("--targets, --rounds and --workers must be positive")
	case c.period <= 0, c.port < 1 || c.port > 65535:
		return errors.New("--period must be positive and --port a port number")
	}
	if c.settleMax == 0 {
		c.settleMax = 2*c.period + 30*time.Second
	}
	return nil
}

// restartRun is one restart of one binary on a fresh copy of the data.
type restartRun struct {
	Bin            string  `json:"bin"`
	Round          int     `json:"round"`
	ServingSeconds float64 `json:"serving_seconds"`
	CPUSeconds     float64 `json:"cpu_seconds"`
}

// restartReport is the restart subcommand's JSON.
type restartReport struct {
	Targets     int          `json:"targets"`
	PeriodMs    float64      `json:"period_ms"`
	DataBytes   int64        `json:"data_bytes"`
	Runs        []restartRun `json:"runs"`
	LoadAverage [2]float64   `json:"load_average"`
}

// runRestart is the restart subcommand.
func runRestart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, asJSON := commandFlags("restart", stderr, "also print the result as JSON on the last line",
		"Makes a bbolt data set once: a real probed with N targets (one readiness probe each:",
		"half HTTP, a quarter of those without keep-alive, half TCP, all against a port that",
		"refuses, so that each has had one transition, with their events in the history), then",
		"restarts each binary on a fresh copy of it, alternately, and reports the time from",
		"exec to the first answered ListTargets (polled every 5 ms) and the CPU used until then.")
	var cfg restartConfig
	if err := parseConfig(fs, args, &cfg); err != nil {
		return err
	}
	dir, stderr, cleanup, err := childRunBins(ctx, "restart", &cfg.bins, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	r := restartReport{Targets: cfg.targets, PeriodMs: ms(cfg.period)}
	r.LoadAverage[0] = loadAverage()
	made := filepath.Join(dir, "data")
	if err := makeRestartData(ctx, cfg, made, stderr); err != nil {
		return err
	}
	if r.DataBytes, err = dirBytes(made); err != nil {
		return err
	}
	for round := 1; round <= cfg.rounds; round++ {
		for _, bin := range cfg.bins {
			run, err := restartOnce(ctx, bin, made, filepath.Join(dir, "copy"), stderr)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", bin, round, err)
			}
			run.Round = round
			fmt.Fprintf(stderr, "restart: %s round %d: serving after %.2fs, %.2fs of CPU\n", bin, round, run.ServingSeconds, run.CPUSeconds)
			r.Runs = append(r.Runs, run)
		}
	}
	r.LoadAverage[1] = loadAverage()
	printRestart(stdout, r)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r)
	}
	return nil
}

// makeRestartData registers the data set's targets with a probed on dir,
// waits until each has been probed once, and stops it.
func makeRestartData(ctx context.Context, cfg restartConfig, dir string, stderr io.Writer) error {
	opts := probedOptions{bin: cfg.bins[0], dataDir: dir, minPeriod: min(cfg.period, 100*time.Millisecond), extra: []string{"--max-targets=0"}}
	p, err := startProbed(ctx, opts, stderr)
	if err != nil {
		return err
	}
	defer func() {
		if p != nil {
			_ = p.stop()
		}
	}()
	mix := newScaleMix(cfg.targets, mixShares{http: 0.5, keepAlive: 0.75}, 0)
	fmt.Fprintf(stderr, "restart: making a data set of %d targets (%s) every %v\n", cfg.targets, mix, cfg.period)
	start := time.Now()
	target := func(i int) *probev1.Target { return scaleTarget(i, mix, cfg.port, cfg.period) }
	if err := registerAll(ctx, p.client, cfg.targets, cfg.workers, target); err != nil {
		return err
	}
	for {
		ss, err := p.scrape(ctx)
		if err != nil {
			return err
		}
		if probes, _ := promSum(ss, metricProbes); probes >= float64(cfg.targets) {
			break
		}
		if time.Since(start) > cfg.settleMax {
			return fmt.Errorf("not every target was probed within %v", cfg.settleMax)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	err = p.stop()
	p = nil
	return err
}

// restartOnce starts bin on a fresh copy (at dst) of the data at src,
// measures its time to serving and the CPU it used by then, and stops it.
func restartOnce(ctx context.Context, bin, src, dst string, stderr io.Writer) (restartRun, error) {
	if err := os.RemoveAll(dst); err != nil {
		return restartRun{}, err
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return restartRun{}, err
	}
	defer func() { _ = os.RemoveAll(dst) }()
	p, err := startProbed(ctx, probedOptions{bin: bin, dataDir: dst, extra: []string{"--max-targets=0"}}, stderr)
	if err != nil {
		return restartRun{}, err
	}
	cpu, err := p.cpu()
	if serr := p.stop(); err == nil {
		err = serr
	}
	return restartRun{Bin: bin, ServingSeconds: p.startup.Seconds(), CPUSeconds: cpu.Seconds()}, err
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	return n, err
}

// printRestart prints r's runs, one row per binary.
func printRestart(w io.Writer, r restartReport) {
	fmt.Fprintf(w, "restart: %d targets every %v, data %.1f MiB, load average %.1f → %.1f\n",
		r.Targets, time.Duration(r.PeriodMs*float64(time.Millisecond)), float64(r.DataBytes)/(1<<20), r.LoadAverage[0], r.LoadAverage[1])
	var bins []string
	for _, run := range r.Runs {
		if !slices.Contains(bins, run.Bin) {
			bins = append(bins, run.Bin)
		}
	}
	for _, bin := range bins {
		var serving, cpu []string
		for _, run := range r.Runs {
			if run.Bin == bin {
				serving = append(serving, strconv.FormatFloat(run.ServingSeconds, 'f', 2, 64))
				cpu = append(cpu, strconv.FormatFloat(run.CPUSeconds, 'f', 2, 64))
			}
		}
		fmt.Fprintf(w, "  %s\n    serving after s  %s\n    CPU to serving s %s\n", bin, strings.Join(serving, ", "), strings.Join(cpu, ", "))
	}
}
