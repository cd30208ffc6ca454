// Command fakepod is a fake Knative pod: it starts listening after
// --delay, answers the activator's readiness probe (a request with
// "K-Network-Probe: queue": 200 "queue" when ready, 503 when not) and any
// other request with a hello. With --flap it is ready for that long, then
// unready for as long, and so on.
//
//	fakepod --addr 127.0.0.1:8081 --delay 1s --flap 3s
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/probed/probed/examples/activator/pod"
)

func main() {
	var o pod.Options
	flag.StringVar(&o.Addr, "addr", "127.0.0.1:8081", "listen address")
	flag.StringVar(&o.Name, "name", "fakepod", "name in the hello response")
	flag.DurationVar(&o.Delay, "delay", 0, "wait this long before listening (the container's start time)")
	flag.DurationVar(&o.Flap, "flap", 0, "when positive: ready for this long, then unready for as long, and so on")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "fakepod: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "fakepod")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := pod.New(o).Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "fakepod:", err)
		os.Exit(1)
	}
}
