package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/probed/probed/engine"
)

// uiConfig holds the status page flags.
type uiConfig struct{}

func (c *uiConfig) register(fs *flag.FlagSet) {}

func (c *uiConfig) validate() error { return nil }

// startUI serves the status page until ctx is done (nothing when it is
// off); the returned function waits for it to stop.
func startUI(ctx context.Context, cfg *config, eng *engine.Engine, sec *security, log *slog.Logger) (wait func(), err error) {
	return func() {}, nil
}
