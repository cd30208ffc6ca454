// Command probed is the probe engine's server: it registers targets over
// gRPC, probes them with Kubernetes-style startup, liveness and readiness
// probes whose durations are millisecond-precise, and streams every result
// transition to its clients. Run `probed --help` for the flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, errHelp) {
		return
	}
	if errors.Is(err, errVersion) {
		fmt.Println(versionLine())
		return
	}
	if err != nil {
		printFlagError(os.Stderr, err)
		os.Exit(2)
	}
	if cfg.printConfig != nil {
		_, _ = os.Stdout.Write(cfg.printConfig)
		return
	}
	if err := serve(ctx, cfg, nil); err != nil {
		fmt.Fprintln(os.Stderr, "probed:", err)
		os.Exit(1)
	}
}

// printFlagError prints a mistake in the command line: the message and
// one line pointing to --help.
func printFlagError(w io.Writer, err error) {
	fmt.Fprintf(w, "probed: %v\nRun 'probed --help' for the flags.\n", err)
}
