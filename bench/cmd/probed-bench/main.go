// Command probed-bench measures probed's building blocks against the models
// they replace. Each subcommand runs its contestants in child processes of
// its own binary, so that their CPU time, memory and goroutines do not mix.
//
// Usage:
//
//	probed-bench <command> [flags]
//
// Commands:
//
//	sched       the timer wheel against one goroutine and time.Ticker per probe
//	e2e         a real probed's CPU per HTTP probe, keep-alive vs kubelet style vs a bare client
//	coldstart   readiness detection latency, pod start to ready event at a Watch client
//	scale       a real probed holding N targets: registrations/s, RSS, goroutines, restart, list
//	restart     restart to serving on copies of one data set, several binaries alternated
//	api         a real probed's CPU per GetTarget, ListTargets page and CreateTarget, called by ghz
//	cluster     probed replicas over etcd: failover, transitions/s, registrations/s, Watch delay, probes/s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/probed/probed/internal/buildinfo"
)

// command is one subcommand. A command without a summary is hidden: it is
// an entry point for child processes, not for people.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands in the order of the usage text.
var commands = []command{
	{name: "sched", summary: "timer wheel vs one goroutine + time.Ticker per probe", run: runSched},
	{name: schedChildCommand, run: runSchedChild},
	{name: "e2e", summary: "real probed over loopback HTTP targets: CPU per probe vs kubelet style and a bare client", run: runE2E},
	{name: "coldstart", summary: "readiness detection latency: pod start -> ready event at a Watch client", run: runColdStart},
	{name: "scale", summary: "a real probed holding N targets: registrations/s, RSS and goroutines per target, restart, list", run: runScale},
	{name: "restart", summary: "restart to serving of a real probed on a copy of one data set, binaries alternated", run: runRestart},
	{name: "api", summary: "the API's cost per call: a real probed's CPU per GetTarget, ListTargets page and CreateTarget under ghz", run: runAPI},
	{name: "cluster", summary: "probed replicas over etcd: failover, transitions/s, registrations/s, Watch delay, probes/s vs one process", run: runCluster},
	{name: e2eTargetsCommand, run: runE2ETargets},
	{name: e2eFloorCommand, run: runE2EFloor},
}

// version is set at build time with -ldflags "-X main.version=..." (make
// build stamps `git describe`); buildinfo.Version falls back to what go
// build recorded.
var version = "dev"

// errUsage reports bad arguments whose explanation was already printed.
var errUsage = errors.New("usage")

func main() {
	// The stop function of NotifyContext is deliberately not called: it
	// waits for the signal goroutine, which in an overloaded child (the
	// baseline model) can wait minutes for a thread, and the process ends
	// right here anyway.
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the subcommand named by args[0] and returns the exit code: 0 on
// success, 2 for bad usage, 1 for any other failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		fmt.Fprintln(stdout, "probed-bench", buildinfo.Version(version), buildinfo.GoVersion())
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(stderr, "probed-bench %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "probed-bench: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: probed-bench <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		if c.summary != "" {
			fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w, "\nRun 'probed-bench <command> -h' for the flags of a command.")
}

// commandFlags returns the flag set of subcommand name, whose usage prints
// about (one line each) and the flags, with the --json flag every command
// has (jsonHelp says what it prints).
func commandFlags(name string, stderr io.Writer, jsonHelp string, about ...string) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, jsonHelp)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: probed-bench %s [flags]\n\n", name)
		for _, line := range about {
			fmt.Fprintln(stderr, line)
		}
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	return fs, asJSON
}

// config is a command's settings: it adds their flags to a flag set and
// checks their values once parsed.
type config interface {
	register(fs *flag.FlagSet)
	validate() error
}

// parseConfig adds the flags of cfg to fs, parses args and validates cfg.
func parseConfig(fs *flag.FlagSet, args []string, cfg config) error {
	cfg.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return cfg.validate()
}

// parseFlags parses args into fs, turning a parse error into errUsage (the
// flag package has already printed it).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %q\n", fs.Args())
		fs.Usage()
		return errUsage
	}
	return nil
}
