package gate_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/kube/internal/controlplane"
)

// The benchmarks run probed-kube as a process of its own, as it runs in a
// cluster, so that its CPU and memory are its own (probed, the kubelet
// stand-in and the pod network share the test's process).

var (
	buildOnce sync.Once
	builtPath string
	buildErr  error
)

// controllerBinary returns probed-kube's binary: $PROBED_KUBE_CONTROLLER
// (make bench-kube builds it), else one go build of ../cmd/probed-kube.
func controllerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROBED_KUBE_CONTROLLER"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "probed-kube-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtPath = filepath.Join(dir, "probed-kube")
		out, err := exec.Command("go", "build", "-o", builtPath, "../cmd/probed-kube").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build probed-kube: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtPath
}

// controllerProcess is a running probed-kube.
type controllerProcess struct {
	t       *testing.T
	cmd     *exec.Cmd
	health  string // its /metrics address
	out     *lockedBuffer
	done    chan struct{}
	stopped bool
}

// lockedBuffer is a bytes.Buffer safe for a process's output and a test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProcess runs probed-kube against the test's control plane and
// probed, without leader election, with args added, and waits until its
// pod cache is synced.
func (f *fixture) startProcess(args ...string) *controllerProcess {
	f.t.Helper()
	kubeconfig, err := f.env.Plane.Kubeconfig(controlplane.Admin)
	if err != nil {
		f.t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	health := l.Addr().String()
	_ = l.Close()
	p := &controllerProcess{t: f.t, health: health, out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(controllerBinary(f.t), append([]string{
		"--kubeconfig", kubeconfig, "--addr", f.probed.Addr, "--leader-elect=false",
		"--health-addr", health, "--owner", "ctl-" + f.ns, "--log-level", "warn",
	}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() { // waited for by stop, through done
		_ = p.cmd.Wait()
		close(p.done)
	}()
	f.t.Cleanup(p.stop)
	poll.UntilMet(f.t, "probed-kube's pod cache synced", 60*time.Second, func() string {
		select {
		case <-p.done:
			f.t.Fatalf("probed-kube exited:\n%s", p.out.String())
		default:
		}
		if p.metric("probed_kube_pod_cache_synced") == 1 {
			return ""
		}
		return "probed-kube not ready within 60 s:\n" + p.out.String()
	})
	return p
}

// stop stops the process (SIGTERM) and waits for it.
func (p *controllerProcess) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("probed-kube did not stop within 30 s of SIGTERM:\n%s", p.out.String())
	}
}

// metrics returns the process's /metrics, name -> the sum of its samples
// (a histogram's: its count, as name_count).
func (p *controllerProcess) metrics() map[string]float64 {
	resp, err := http.Get("http://" + p.health + "/metrics")
	if err != nil {
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			// The value is after the labels, which may hold spaces.
			j := strings.LastIndexByte(line, '}')
			name, rest = name[:i], strings.TrimSpace(line[j+1:])
		}
		if v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64); err == nil {
			out[name] += v
		}
	}
	return out
}

// metric returns one metric's sum, 0 when absent or unreachable.
func (p *controllerProcess) metric(name string) float64 { return p.metrics()[name] }

// cpu returns the process's CPU time (user + system) so far.
func (p *controllerProcess) cpu() time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: utime is the 14th
	// field of the line, stime the 15th.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// rss returns the process's resident memory, in bytes.
func (p *controllerProcess) rss() int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// patches returns the process's condition writes so far (and failures).
func (p *controllerProcess) patches() (writes, errs float64) {
	m := p.metrics()
	return m["probed_kube_condition_patches_total"], m["probed_kube_condition_patch_errors_total"]
}
