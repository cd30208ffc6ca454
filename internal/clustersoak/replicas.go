package clustersoak

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/internal/procs"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// BuildProbed builds probed (probedproc.BuildVersion) into dir, stamped
// with a version that names slot 0; Run copies it once per replica slot
// with the slot's version in place (same length), so each replica's
// probes say in their User-Agent which replica sent them.
func BuildProbed(ctx context.Context, dir string) (string, error) {
	var out bytes.Buffer
	bin, err := probedproc.BuildVersion(ctx, dir, replicaVersion(0), &out)
	if err != nil {
		return "", fmt.Errorf("%w\n%s", err, out.Bytes())
	}
	return bin, nil
}

// slotBinary writes a copy of base whose stamped version names slot.
func slotBinary(base, dir string, slot int) (string, error) {
	b, err := os.ReadFile(base)
	if err != nil {
		return "", err
	}
	from, to := []byte(replicaVersion(0)), []byte(replicaVersion(slot))
	if bytes.Count(b, from) == 0 {
		return "", fmt.Errorf("%s: no %q in the binary: was it built by BuildProbed?", base, from)
	}
	bin := filepath.Join(dir, fmt.Sprintf("probed-%02d", slot))
	return bin, os.WriteFile(bin, bytes.ReplaceAll(b, from, to), 0o755)
}

// replica is one probed process (a slot: r1…r6) of the soak.
type replica struct {
	slot    int
	id      string
	bin     string
	args    []string
	addr    string
	metrics string
	logPath string

	mu       sync.Mutex          // guards the fields below
	proc     *probedproc.Process // nil when it does not run
	paused   bool
	conn     *grpc.ClientConn
	started  time.Time
	restarts int
}

// replicaState is what the harness knows of a replica.
type replicaState int

const (
	down replicaState = iota
	running
	paused
)

func (r *replica) state() replicaState {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.proc == nil:
		return down
	case r.paused:
		return paused
	default:
		return running
	}
}

// start starts the process and waits until it answers a call.
func (r *replica) start(ctx context.Context) error {
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "--- start %s\n", time.Now().Format(time.RFC3339Nano))
	proc, err := probedproc.Start(r.bin, r.args, probedproc.Options{Output: logf})
	if err != nil {
		_ = logf.Close()
		return fmt.Errorf("%s: %w", r.id, err)
	}
	go func() { // its output is copied until it has exited
		<-proc.Exited()
		_ = logf.Close()
	}()
	conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		_ = proc.Kill()
		return err
	}
	r.mu.Lock()
	if r.proc != nil || !r.started.IsZero() {
		r.restarts++
	}
	r.proc, r.conn, r.paused, r.started = proc, conn, false, time.Now()
	r.mu.Unlock()
	// Served when it answers a call (its log level may hide "probed
	// serving"), or gone.
	svc := probev1.NewProbeServiceClient(conn)
	var last error
	err = poll.Every(20*time.Millisecond).Wait(r.id+" answering a call", 2*time.Minute, func() bool {
		if !proc.Running() {
			return true
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, last = svc.ListTargets(cctx, &probev1.ListTargetsRequest{PageSize: 1})
		return last == nil || ctx.Err() != nil
	})
	switch {
	case !proc.Running():
		r.forget()
		return fmt.Errorf("%s exited at start; its log: %s", r.id, r.logPath)
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("%w: %w", err, last)
	}
	return nil
}

// forget drops the process (it exited).
func (r *replica) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil {
		_ = r.conn.Close()
	}
	r.proc, r.conn, r.paused = nil, nil, false
}

// kill ends the process with SIGKILL and waits until it has exited.
func (r *replica) kill() {
	r.mu.Lock()
	proc := r.proc
	r.mu.Unlock()
	if proc == nil {
		return
	}
	_ = proc.Kill()
	r.forget()
}

// terminate ends the process with SIGTERM (a graceful leave), killing it
// after limit.
func (r *replica) terminate(limit time.Duration) error {
	r.mu.Lock()
	proc := r.proc
	r.mu.Unlock()
	if proc == nil {
		return nil
	}
	defer r.forget()
	if err := proc.Stop(limit); errors.Is(err, procs.ErrKilled) {
		return fmt.Errorf("%s did not stop within %v of SIGTERM", r.id, limit)
	}
	return nil
}

// pause stops (SIGSTOP) or continues (SIGCONT) the process.
func (r *replica) pause(stop bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return fmt.Errorf("%s is not running", r.id)
	}
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	r.paused = stop
	return r.proc.Signal(sig)
}

// client is a client of the replica, nil when it does not run.
func (r *replica) client() probev1.ProbeServiceClient {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil {
		return nil
	}
	return probev1.NewProbeServiceClient(r.conn)
}

func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return 0
	}
	return r.proc.Pid()
}

// usage is a replica's resident set and goroutines.
type usage struct {
	at         time.Time
	rss        int64 // bytes
	goroutines int
}

// sample reads the replica's RSS (/proc) and goroutines (its metrics).
func (r *replica) sample(ctx context.Context) (usage, error) {
	pid := r.pid()
	if pid == 0 {
		return usage{}, errors.New("not running")
	}
	rss, err := procRSS(pid)
	if err != nil {
		return usage{}, err
	}
	g, err := r.metric(ctx, "go_goroutines")
	if err != nil {
		return usage{}, err
	}
	return usage{at: time.Now(), rss: rss, goroutines: int(g)}, nil
}

// metric reads a metric without labels (or the sum of a metric's
// labelled series) from the replica's Prometheus endpoint.
func (r *replica) metric(ctx context.Context, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metrics+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	return metricValue(resp.Body, name)
}

// metricValue sums the samples of name in a Prometheus text exposition.
func metricValue(body io.Reader, name string) (float64, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no metric %s", name)
	}
	return sum, sc.Err()
}

// procRSS is the resident set of pid, from /proc/<pid>/status.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
