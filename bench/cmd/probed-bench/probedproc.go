package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/internal/procs"
)

// probedBinary returns bin, or when it is empty a probed built into dir
// from this repository (probedproc.Build); command names the subcommand
// in the progress line.
func probedBinary(ctx context.Context, command, bin, dir string, stderr io.Writer) (string, error) {
	if bin != "" {
		return bin, nil
	}
	fmt.Fprintf(stderr, "%s: building probed\n", command)
	bin, err := probedproc.Build(ctx, dir, stderr)
	if err != nil {
		return "", fmt.Errorf("%w (or pass --probed-bin)", err)
	}
	return bin, nil
}

// probedProc is a probed server running as a child process, with a
// client of it.
type probedProc struct {
	*probedproc.Process
	addr        string
	metricsAddr string // "" when this build has no --metrics-addr
	client      *client.Client
	// startup is the time from the exec to the first call answered:
	// opening and loading the store, restoring, listening (within the
	// polling interval of waitReady).
	startup time.Duration
}

// probedOptions are the settings of one server.
type probedOptions struct {
	bin       string
	dataDir   string
	minPeriod time.Duration
	extra     []string // more flags
}

// startProbed starts probed with opts on free loopback ports and waits
// until it answers. Flags this build lacks (metrics, registration rate
// limits) are left out. The caller must stop it.
func startProbed(ctx context.Context, opts probedOptions, stderr io.Writer) (*probedProc, error) {
	known, err := probedproc.Flags(ctx, opts.bin)
	if err != nil {
		return nil, err
	}
	addr, err := probedproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"--addr=" + addr, "--data-dir=" + opts.dataDir, "--log-level=warn"}
	if opts.minPeriod > 0 {
		args = append(args, "--min-period="+opts.minPeriod.String())
	}
	p := &probedProc{addr: addr}
	if known["metrics-addr"] {
		if p.metricsAddr, err = probedproc.FreeAddr(); err != nil {
			return nil, err
		}
		args = append(args, "--metrics-addr="+p.metricsAddr)
	}
	if known["registrations-per-second"] {
		args = append(args, "--registrations-per-second=0") // the benchmarks register thousands at once
	}
	if known["max-watchers"] {
		args = append(args, "--max-watchers=0")
	}
	if known["max-watchers-per-client"] {
		args = append(args, "--max-watchers-per-client=0")
	}
	args = append(args, opts.extra...)
	started := time.Now()
	if p.Process, err = probedproc.Start(opts.bin, args, probedproc.Options{Output: stderr}); err != nil {
		return nil, err
	}
	// Reconnect every few ms while the server is not listening yet, so
	// that the startup is measured, not gRPC's backoff (1s at first).
	fast := grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: readyPoll, Multiplier: 1, MaxDelay: readyPoll},
		MinConnectTimeout: time.Second,
	})
	if p.client, err = client.Dial(ctx, addr, client.WithDialOptions(fast)); err != nil {
		_ = p.stop()
		return nil, err
	}
	if err := p.waitReady(ctx, startupLimit); err != nil {
		_ = p.stop()
		return nil, err
	}
	p.startup = time.Since(started)
	return p, nil
}

// readyPoll is how often waitReady calls a starting server, and so the
// resolution of probedProc.startup.
const readyPoll = 5 * time.Millisecond

// startupLimit bounds the startup of a server (restoring 100,000 targets
// takes seconds).
const startupLimit = 2 * time.Minute

// waitReady waits until the server answers a call.
func (p *probedProc) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		_, _, err := p.client.List(ctx, client.ListOptions{PageSize: 1})
		if err == nil {
			return nil
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("probed exited at start: %w", p.Err())
		case <-ctx.Done():
			return fmt.Errorf("probed did not answer within %v: %w", limit, err)
		case <-time.After(readyPoll):
		}
	}
}

// cpu returns the CPU time the server has used so far.
func (p *probedProc) cpu() (time.Duration, error) { return procs.CPU(p.Pid()) }

// peakRSS returns the server's peak resident set size.
func (p *probedProc) peakRSS() (int64, error) { return procs.PeakRSS(p.Pid()) }

// errNoMetrics: this probed build has no Prometheus endpoint.
var errNoMetrics = errors.New("probed has no --metrics-addr")

// scrape reads the server's Prometheus metrics.
func (p *probedProc) scrape(ctx context.Context) ([]promSample, error) {
	b, err := p.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	return parsePromText(bytes.NewReader(b))
}

// get GETs path from the server's metrics listener and returns the body
// of a 200 answer.
func (p *probedProc) get(ctx context.Context, path string) ([]byte, error) {
	if p.metricsAddr == "" {
		return nil, errNoMetrics
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metricsAddr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return b, nil
}

// stopGrace is how long stop lets probed end gracefully: at 100,000
// targets on a loaded machine its shutdown (every probe stopped, the
// store flushed and closed) took more than 10 s.
const stopGrace = time.Minute

// stop ends the server gracefully (SIGTERM), killing it after stopGrace,
// and closes the client.
func (p *probedProc) stop() error {
	if p.client != nil {
		_ = p.client.Close()
	}
	if err := p.Stop(stopGrace); err != nil {
		return fmt.Errorf("probed: %w", err)
	}
	return nil
}

// tempDir makes a temporary directory for one benchmark run.
func tempDir(prefix string) (string, error) { return os.MkdirTemp("", "probed-bench-"+prefix+"-") }

// childRun is the setup every subcommand that runs probed as a child
// shares: stderr made safe for the children's concurrent writes, a
// temporary directory, and the probed binary (*bin, or one built into the
// directory). cleanup removes the directory.
func childRun(ctx context.Context, command string, bin *string, stderr io.Writer) (dir string, w io.Writer, cleanup func(), err error) {
	w = &syncWriter{w: stderr}
	if dir, err = tempDir(command); err != nil {
		return "", nil, nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	if *bin, err = probedBinary(ctx, command, *bin, dir, w); err != nil {
		cleanup()
		return "", nil, nil, err
	}
	return dir, w, cleanup, nil
}

// childRunBins is childRun for a command comparing binaries: the first
// of bins is built when it is missing (one built binary when bins is
// empty).
func childRunBins(ctx context.Context, command string, bins *[]string, stderr io.Writer) (dir string, w io.Writer, cleanup func(), err error) {
	first := ""
	if len(*bins) > 0 {
		first = (*bins)[0]
	}
	if dir, w, cleanup, err = childRun(ctx, command, &first, stderr); err != nil {
		return "", nil, nil, err
	}
	if len(*bins) == 0 {
		*bins = []string{first}
	}
	(*bins)[0] = first
	return dir, w, cleanup, nil
}

// syncWriter serializes writes to w: the benchmarks' children write their
// stderr through it (os/exec copies it from a goroutine when it is not a
// file) while the parent reports progress.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
