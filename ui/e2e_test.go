//go:build linux

package ui_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/ciskip"
	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestStatusPageInChromium runs the status page in headless Chromium
// (ui/e2e/statuspage.mjs, with playwright-core) against a real probed
// with a thousand targets at 1,400 px: the transitions panel opens with
// the recent past, the reason a target fails is visible without
// scrolling at 1,280 to 1,440 px, a target turns ready on the page as
// soon as its server comes up, the readiness timelines show a flapping
// target, filters (and the count chips with them) and the detail panel
// work, and the page resumes by revision across a restart of probed. It
// saves screenshots in artifacts/ (and docs/ui.png when
// PROBED_UPDATE_DOCS=1 or it is missing).
//
// It needs Debian's chromium and `npm ci --prefix ui/e2e`; without them it
// is skipped, except where CI=true or PROBED_REQUIRE_BROWSER=1, where it
// fails.
func TestStatusPageInChromium(t *testing.T) {
	chromium := cmp.Or(os.Getenv("PROBED_CHROMIUM"), "/usr/bin/chromium")
	node, err := exec.LookPath("node")
	switch {
	case testing.Short():
		missing(t, "-short")
	case err != nil:
		missing(t, "node is not installed")
	}
	if _, err := os.Stat(chromium); err != nil {
		missing(t, chromium+" is not installed")
	}
	if _, err := os.Stat(filepath.Join("e2e", "node_modules", "playwright-core", "package.json")); err != nil {
		missing(t, "ui/e2e/node_modules has no playwright-core")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	backend := httptest.NewServer(backendHandler(time.Now()))
	defer backend.Close()
	backendPort := backend.Listener.Addr().(*net.TCPAddr).Port

	var buildLog bytes.Buffer
	bin, err := probedproc.Build(ctx, t.TempDir(), &buildLog)
	if err != nil {
		t.Fatalf("%v\n%s", err, buildLog.Bytes())
	}
	// Fixed ports, so that the restarted probed is where the page is.
	p := &probedProcess{t: t, bin: bin, dataDir: t.TempDir(), addr: refused.Reserve(t).Addr(), uiAddr: refused.Reserve(t).Addr()}
	p.start(ctx)
	defer p.stop()

	c, err := client.Dial(ctx, p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	targetPort := int(refused.Reserve(t).Port)
	targets := e2eTargets(p.addr, backendPort, targetPort)
	for _, tg := range targets {
		create(ctx, t, c, tg)
	}

	artifacts := filepath.Join(root, "artifacts")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	shots := []string{filepath.Join(artifacts, "ui.png")}
	docShot := filepath.Join(root, "docs", "ui.png")
	if _, err := os.Stat(docShot); err != nil || os.Getenv("PROBED_UPDATE_DOCS") == "1" {
		shots = append(shots, docShot)
	}

	cmd := exec.CommandContext(ctx, node, "statuspage.mjs")
	cmd.Dir = "e2e"
	cmd.Env = append(os.Environ(),
		"PROBED_UI_URL=http://"+p.uiAddr+"/",
		"TARGET_PORT="+strconv.Itoa(targetPort),
		"EXPECT_TARGETS="+strconv.Itoa(len(targets)),
		"CHROMIUM="+chromium,
		"SCREENSHOTS="+strings.Join(shots, ","),
		"DETAIL_SCREENSHOT="+filepath.Join(artifacts, "ui-detail.png"),
		"NARROW_SCREENSHOT="+filepath.Join(artifacts, "ui-1280.png"),
	)
	// Node and the browser it starts are one process group, killed
	// together if the test times out.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	passed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		switch line {
		case "@@ restart":
			t.Log("restarting probed")
			p.stop()
			p.start(ctx)
			if _, err := c.Delete(ctx, "legacy"); err != nil {
				t.Errorf("delete legacy: %v", err)
			}
			if _, err := io.WriteString(stdin, "ok\n"); err != nil {
				t.Errorf("answering the browser test: %v", err)
			}
		case "PASS":
			passed = true
		default:
			t.Log("e2e: " + line)
		}
	}
	err = cmd.Wait()
	if err != nil || !passed {
		t.Fatalf("the browser test failed (%v):\n%s\nprobed's log:\n%s", err, stderr.String(), p.logs())
	}
	t.Logf("screenshots: %s, %s, %s", strings.Join(shots, ", "), filepath.Join(artifacts, "ui-1280.png"), filepath.Join(artifacts, "ui-detail.png"))
}

// missing skips the test (make test says so at its end), or fails it
// where the browser is required.
func missing(t *testing.T, why string) {
	t.Helper()
	ciskip.Missing(t, "PROBED_REQUIRE_BROWSER", "status page browser test not run: "+why+
		" (it needs Debian's chromium: apt-get install chromium; and node with ui/e2e's packages: npm ci --prefix ui/e2e)")
}

// backendHandler serves the targets' probes: /healthz is up, /slow answers
// in 5-60ms, /flaky is up 4s then down 2s.
func backendHandler(start time.Time) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Duration(5+rand.IntN(55)) * time.Millisecond) // a slow target, in real time: the page shows the latency
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/flaky", func(w http.ResponseWriter, r *http.Request) {
		if time.Since(start)%(6*time.Second) >= 4*time.Second {
			http.Error(w, "cache warming up", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// e2eTargets are a thousand quiet targets (node-0000...) and a few
// interesting ones; checkout probes targetPort, where the browser test
// starts a server.
func e2eTargets(probedAddr string, backend, targetPort int) []*probev1.Target {
	_, probedPort, _ := net.SplitHostPort(probedAddr)
	var specs []string
	for i := range 1000 {
		specs = append(specs, fmt.Sprintf(`{"name": "node-%04d", "labels": {"app": "fleet", "zone": "%c"},
			"readinessProbe": {"tcpSocket": {"host": "127.0.0.1", "port": %d}, "periodSeconds": 5}}`, i, 'a'+i%4, backend))
	}
	specs = append(specs,
		fmt.Sprintf(`{"name": "api", "labels": {"app": "api", "tier": "backend"},
			"readinessProbe": {"httpGet": {"host": "127.0.0.1", "port": %[1]d, "path": "/slow"}, "periodSeconds": 1, "periodMilliseconds": -800},
			"livenessProbe": {"tcpSocket": {"host": "127.0.0.1", "port": %[1]d}, "periodSeconds": 1}}`, backend),
		fmt.Sprintf(`{"name": "auth", "labels": {"app": "auth", "tier": "backend"},
			"startupProbe": {"grpc": {"host": "127.0.0.1", "port": %[2]s}, "periodSeconds": 1},
			"readinessProbe": {"grpc": {"host": "127.0.0.1", "port": %[2]s}, "periodSeconds": 1, "periodMilliseconds": -500},
			"livenessProbe": {"httpGet": {"host": "127.0.0.1", "port": %[1]d, "path": "/healthz"}, "periodSeconds": 2}}`, backend, probedPort),
		fmt.Sprintf(`{"name": "cache", "labels": {"app": "cache", "tier": "backend"},
			"readinessProbe": {"httpGet": {"host": "127.0.0.1", "port": %d, "path": "/flaky"}, "periodSeconds": 1, "periodMilliseconds": -750, "failureThreshold": 2}}`, backend),
		fmt.Sprintf(`{"name": "checkout", "labels": {"app": "checkout", "tier": "frontend"},
			"readinessProbe": {"httpGet": {"host": "127.0.0.1", "port": %d, "path": "/healthz"}, "periodSeconds": 1, "periodMilliseconds": -900}}`, targetPort),
		fmt.Sprintf(`{"name": "db-primary", "labels": {"app": "db", "role": "primary", "tier": "data"},
			"readinessProbe": {"tcpSocket": {"host": "127.0.0.1", "port": %[1]d}, "periodSeconds": 1},
			"livenessProbe": {"tcpSocket": {"host": "127.0.0.1", "port": %[1]d}, "periodSeconds": 2}}`, backend),
		`{"name": "db-replica", "labels": {"app": "db", "role": "replica", "tier": "data"},
			"readinessProbe": {"tcpSocket": {"host": "127.0.0.1", "port": 1}, "periodSeconds": 1}}`,
		fmt.Sprintf(`{"name": "frontend", "labels": {"app": "frontend", "tier": "frontend"},
			"readinessProbe": {"httpGet": {"host": "127.0.0.1", "port": %[1]d, "path": "/healthz"}, "periodSeconds": 1, "periodMilliseconds": -500},
			"livenessProbe": {"httpGet": {"host": "127.0.0.1", "port": %[1]d, "path": "/healthz"}, "periodSeconds": 1}}`, backend),
		fmt.Sprintf(`{"name": "legacy", "labels": {"app": "legacy"},
			"readinessProbe": {"httpGet": {"host": "127.0.0.1", "port": %d, "path": "/healthz"}, "periodSeconds": 1},
			"lifecycle": {"preStop": {"sleep": {"seconds": 120}}}, "terminationGracePeriodSeconds": 180}`, backend),
	)
	out := make([]*probev1.Target, len(specs))
	for i, s := range specs {
		out[i] = &probev1.Target{}
		if err := protojson.Unmarshal([]byte(s), out[i]); err != nil {
			panic(fmt.Sprintf("target %d: %v", i, err))
		}
	}
	return out
}

// create creates tg, waiting out the server's rate limit on registrations.
func create(ctx context.Context, t *testing.T, c *client.Client, tg *probev1.Target) {
	t.Helper()
	for {
		_, err := c.Create(ctx, tg)
		if !errors.Is(err, client.ErrResourceExhausted) {
			if err != nil {
				t.Fatalf("create %s: %v", tg.GetName(), err)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("create %s: %v", tg.GetName(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// probedProcess is the probed binary running on fixed addresses.
type probedProcess struct {
	t            *testing.T
	bin, dataDir string
	addr, uiAddr string
	proc         *probedproc.Process // nil when not running
	last         *probedproc.Process // the latest run, whose log logs returns
}

// start starts probed and waits until it serves.
func (p *probedProcess) start(ctx context.Context) {
	p.t.Helper()
	// A 30-second timeline: the test's transitions fill it.
	args := []string{"--addr", p.addr, "--ui-addr", p.uiAddr, "--ui-timeline", "30s", "--data-dir", p.dataDir, "--log-format", "json"}
	flags, err := probedproc.Flags(ctx, p.bin)
	if err != nil {
		p.t.Fatal(err)
	}
	if flags["metrics-addr"] {
		// Another probed (make run) may hold the default metrics port.
		args = append(args, "--metrics-addr", "")
	}
	if flags["registrations-per-second"] {
		args = append(args, "--registrations-per-second", "0") // a thousand creations at once
	}
	if p.proc, err = probedproc.Start(p.bin, args, probedproc.Options{}); err != nil {
		p.t.Fatal(err)
	}
	p.last = p.proc
	// "probed serving" comes after the status page serves.
	if err := p.proc.WaitServing(30 * time.Second); err != nil {
		p.proc = nil
		p.t.Fatal(err)
	}
}

// stop stops probed gracefully (SIGTERM) and waits for it.
func (p *probedProcess) stop() {
	if p.proc == nil {
		return
	}
	if err := p.proc.Stop(time.Minute); err != nil {
		p.t.Errorf("probed: %v\n%s", err, p.proc.Log())
	}
	p.proc = nil
}

func (p *probedProcess) logs() string {
	if p.last == nil {
		return ""
	}
	return p.last.Log()
}
