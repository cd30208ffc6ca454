package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/feature"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=..." (make
// build stamps `git describe`); buildVersion falls back to what go build
// recorded.
var version = "dev"

// buildVersion is the version of this binary (buildinfo.Version).
func buildVersion() string { return buildinfo.Version(version) }

// versionLine is what --version prints: "probed VERSION GOVERSION".
func versionLine() string { return "probed " + buildVersion() + " " + buildinfo.GoVersion() }

var (
	errHelp    = errors.New("help requested")
	errVersion = errors.New("version requested") // print versionLine
)

// config is everything the flags set.
type config struct {
	addr         string
	dataDir      string
	gates        feature.Gates
	minPeriod    time.Duration
	minTimeout   time.Duration
	logLevel     slog.Level
	logFormat    string
	allowExec    bool
	subreaper    bool   // --subreaper: reap exec probes' leftovers also when not PID 1
	grpcConns    string // --grpc-probe-connections
	history      int
	historyBytes int
	watchBuffer  int
	watchBytes   int // --watch-buffer-bytes
	watchTotal   int // --watch-total-bytes
	maxTargets   int
	maxInflight  int
	tick         time.Duration
	grace        time.Duration

	// printConfig, with --print-config, is the effective configuration
	// for main to print instead of serving.
	printConfig []byte

	cluster   clusterConfig   // cluster.go
	telemetry telemetryConfig // telemetry.go
	security  securityConfig  // security.go
	ui        uiConfig        // ui.go
	xds       xdsConfig       // xds.go
}

// parseFlags reads the command line. Bad values (an unknown feature gate,
// a malformed duration) are errors that say what is wrong.
func parseFlags(args []string, out io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("probed", flag.ContinueOnError)
	// A mistake is returned, not printed with the whole usage after it
	// (which would scroll it away); --help prints the usage.
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:50051", "gRPC listen address")
	fs.StringVar(&c.dataDir, "data-dir", "./probed-data", "directory of the embedded store (bbolt file probed.db); created if missing")
	fs.Var(&c.gates, "feature-gates", "feature gates, Kubernetes syntax: "+gateHelp())
	fs.DurationVar(&c.minPeriod, "min-period", probe.DefaultMinPeriod, "floor of a probe's effective period (and initial period)")
	fs.DurationVar(&c.minTimeout, "min-timeout", probe.DefaultMinTimeout, "floor of a probe's effective timeout")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&c.allowExec, "allow-exec", false, "allow exec probes (they run commands on this host on a remote client's request)")
	fs.BoolVar(&c.subreaper, "subreaper", false, "with --allow-exec, become a child subreaper and reap the processes exec probes leave behind (always on when probed is PID 1, as in a container)")
	fs.StringVar(&c.grpcConns, "grpc-probe-connections", "kept", "how gRPC probes connect: kept (one connection per address and TLS settings, shared by the probes of it) or per-probe (a connection per probe, as kubelet)")
	fs.IntVar(&c.history, "history", engine.DefaultHistory, "events retained for Watch resumption")
	fs.IntVar(&c.historyBytes, "history-bytes", engine.DefaultHistoryBytes, "bytes of events retained (estimated)")
	fs.IntVar(&c.watchBuffer, "watch-buffer", engine.DefaultWatchBuffer, "live events a watcher may have pending before it is ended as too slow")
	fs.IntVar(&c.watchBytes, "watch-buffer-bytes", engine.DefaultWatchBufferBytes, "bytes of events (estimated) a watcher may have pending before it is ended as too slow (0: no bound)")
	fs.IntVar(&c.watchTotal, "watch-total-bytes", engine.DefaultWatchTotalBytes, "bytes of events (estimated) pending in all watchers together; beyond it the slowest are ended (0: no bound)")
	fs.IntVar(&c.maxTargets, "max-targets", defaultMaxTargets, "maximum number of targets (0: no limit)")
	fs.IntVar(&c.maxInflight, "max-inflight", engine.DefaultMaxInflight, "maximum probes running at once; a probe due beyond it is skipped and counted")
	fs.DurationVar(&c.tick, "tick", time.Millisecond, "timer wheel tick (scheduling resolution)")
	fs.DurationVar(&c.grace, "shutdown-grace", 10*time.Second, "how long a graceful shutdown may take before connections are cut and the store is closed (changes it could not write are logged)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	configFile := fs.String("config", "", "YAML file whose keys are these flags' names (metrics-addr: 127.0.0.1:9464); flags given on the command line override it")
	printConfig := fs.Bool("print-config", false, "print the effective configuration (defaults, --config file and flags) as a --config file, and exit")
	c.cluster.register(fs)
	c.telemetry.register(fs)
	c.security.register(fs)
	c.ui.register(fs)
	c.xds.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(out)
			fs.Usage()
			return nil, errHelp
		}
		return nil, err
	}
	if *showVersion {
		return nil, errVersion
	}
	if *configFile != "" {
		if err := applyConfigFile(fs, *configFile); err != nil {
			return nil, err
		}
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	switch {
	case c.logFormat != "text" && c.logFormat != "json":
		return nil, fmt.Errorf("--log-format %q: must be text or json", c.logFormat)
	case c.grpcConns != "kept" && c.grpcConns != "per-probe":
		return nil, fmt.Errorf("--grpc-probe-connections %q: must be kept or per-probe", c.grpcConns)
	case c.minPeriod <= 0:
		return nil, fmt.Errorf("--min-period %v: must be positive", c.minPeriod)
	case c.minTimeout <= 0:
		return nil, fmt.Errorf("--min-timeout %v: must be positive", c.minTimeout)
	case c.tick <= 0 || c.tick > time.Second:
		return nil, fmt.Errorf("--tick %v: must be between 1ns and 1s", c.tick)
	case c.watchBytes < 0:
		return nil, fmt.Errorf("--watch-buffer-bytes %d: must not be negative", c.watchBytes)
	case c.watchTotal < 0:
		return nil, fmt.Errorf("--watch-total-bytes %d: must not be negative", c.watchTotal)
	}
	if err := c.cluster.validate(c.addr); err != nil {
		return nil, err
	}
	if err := c.telemetry.validate(); err != nil {
		return nil, err
	}
	if err := c.security.validate(c.listeners()); err != nil {
		return nil, err
	}
	if err := c.ui.validate(); err != nil {
		return nil, err
	}
	if err := c.xds.validate(); err != nil {
		return nil, err
	}
	if *printConfig {
		b, err := effectiveConfig(fs)
		if err != nil {
			return nil, err
		}
		c.printConfig = b
	}
	return c, nil
}

// listener is an address probed listens on, and the flag that sets it.
type listener struct{ flag, addr string }

// listeners are the addresses probed serves on: the API, and the status
// page and metrics when they are on.
func (c *config) listeners() []listener {
	ls := []listener{{"--addr", c.addr}}
	if c.ui.addr != "" {
		ls = append(ls, listener{"--ui-addr", c.ui.addr})
	}
	if c.telemetry.metricsAddr != "" {
		ls = append(ls, listener{"--metrics-addr", c.telemetry.metricsAddr})
	}
	if c.xds.addr != "" {
		ls = append(ls, listener{xdsFlag, c.xds.addr})
	}
	return ls
}

// byteBound converts a byte-bound flag (0: no bound) to the engine's
// option (0: the default, -1: no bound).
func byteBound(v int) int {
	if v == 0 {
		return -1
	}
	return v
}

func gateHelp() string {
	var parts []string
	for _, g := range feature.Known() {
		parts = append(parts, string(g)+"=true|false")
	}
	return strings.Join(parts, ",") + " (all default to true)"
}
