package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/wheel"
	"github.com/probed/probed/telemetry"
)

// scrapeInterval is how often the sched benchmark's --metrics scrapes the
// metrics, as a Prometheus would.
const scrapeInterval = time.Second

// startSchedMetrics wires w's metrics as probed wires its scheduler's: a
// Telemetry with the Prometheus exporter, whose one callback reads
// w.Stats() (the wheel's fires, skips, misses and lateness histogram) at
// each collection, served over loopback HTTP and scraped every
// scrapeInterval until ctx is done. It returns the URL of the metrics;
// stop, called once ctx is done, waits for the scraper and shuts the rest
// down.
func startSchedMetrics(ctx context.Context, w *wheel.Wheel) (url string, stop func(), err error) {
	tel, err := telemetry.New(ctx, telemetry.Config{Prometheus: true})
	if err != nil {
		return "", nil, err
	}
	if err := tel.Observe(func() engine.Stats { return engine.Stats{Wheel: w.Stats()} }); err != nil {
		_ = tel.Shutdown(ctx)
		return "", nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = tel.Shutdown(ctx)
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", tel.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	url = "http://" + lis.Addr().String() + "/metrics"
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(lis) })
	wg.Go(func() {
		t := time.NewTicker(scrapeInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = scrapeOnce(ctx, url, io.Discard)
			}
		}
	})
	return url, func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		wg.Wait()
		_ = tel.Shutdown(sctx)
	}, nil
}

// scrapeOnce GETs url and copies the whole answer to out, as a scraper
// reads it.
func scrapeOnce(ctx context.Context, url string, out io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(out, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("scrape: %s", resp.Status)
	}
	return nil
}

// errMetricsModel says that --metrics applies to the wheel only.
var errMetricsModel = errors.New("--metrics applies to the wheel model only")

// metricsOverhead is the extra CPU per fire of the wheel with --metrics,
// in percent of the wheel's without.
func metricsOverhead(without, with modelResult) float64 {
	return 100 * (ratio(with.CPUNsPerFire, without.CPUNsPerFire) - 1)
}
