package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/probed/probed/internal/procs"
)

// Hidden subcommands of the e2e benchmark.
const (
	// e2eTargetsCommand serves the HTTP targets: it prints their ports as
	// one JSON line and serves until its stdin is closed.
	e2eTargetsCommand = "e2e-targets"
	// e2eFloorCommand probes the targets with a bare net/http loop and
	// reports its cost as one JSON line.
	e2eFloorCommand = "e2e-floor"
)

// targetsHello is the first line the targets child prints.
type targetsHello struct {
	Ports []int `json:"ports"`
}

// targetBody is what every target answers, with 200.
const targetBody = "ok"

// runE2ETargets is the hidden targets child: n listeners on loopback,
// one HTTP server (keep-alive on) answering 200 "ok" to everything, and
// gRPC health (SERVING) over HTTP/2 without TLS on the same ports.
func runE2ETargets(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(e2eTargetsCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("targets", 1, "number of targets (listeners)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer()) // "" is SERVING
	defer g.Stop()
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true) // gRPC clients speak HTTP/2 at once
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				g.ServeHTTP(w, r)
				return
			}
			_, _ = io.WriteString(w, targetBody)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		Protocols:         &protocols,
	}
	defer func() { _ = srv.Close() }()
	hello := targetsHello{Ports: make([]int, 0, *n)}
	for range *n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listener %d: %w", len(hello.Ports), err)
		}
		hello.Ports = append(hello.Ports, lis.Addr().(*net.TCPAddr).Port)
		go func() { _ = srv.Serve(lis) }()
	}
	if err := writeJSONLine(stdout, hello); err != nil {
		return err
	}
	// Serve until the parent closes stdin (or dies), or a signal.
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	return nil
}

// targetsProc is the targets child, seen from the parent.
type targetsProc struct {
	child *procs.Child
	stdin io.WriteCloser
	ports []int
}

// startTargets starts the targets child with n targets and returns once
// they listen.
func startTargets(ctx context.Context, n int, stderr io.Writer) (*targetsProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, e2eTargetsCommand, "--targets="+strconv.Itoa(n))
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	child, err := procs.Start(cmd)
	if err != nil {
		return nil, err
	}
	p := &targetsProc{child: child, stdin: stdin}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	if !sc.Scan() {
		_ = p.stop()
		return nil, fmt.Errorf("targets child printed nothing: %w", sc.Err())
	}
	var hello targetsHello
	if err := json.Unmarshal(sc.Bytes(), &hello); err != nil {
		_ = p.stop()
		return nil, fmt.Errorf("targets child: %w", err)
	}
	if len(hello.Ports) != n {
		_ = p.stop()
		return nil, fmt.Errorf("targets child: got %d ports, want %d", len(hello.Ports), n)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	p.ports = hello.Ports
	return p, nil
}

// stop closes the child's stdin, which ends it, and waits for it.
func (p *targetsProc) stop() error {
	_ = p.stdin.Close()
	select {
	case <-p.child.Exited():
		return p.child.Err()
	case <-time.After(10 * time.Second):
		return errors.Join(errors.New("targets child did not stop; killed"), p.child.Kill())
	}
}

// The clients of the floor child.
const (
	// floorNetHTTP GETs every target with one shared net/http Transport.
	floorNetHTTP = "net/http"
	// floorSocket writes a request built once on one connection per
	// target and parses the answer with bufio: what a probe costs at the
	// least.
	floorSocket = "socket"
)

// floorConfig is the workload of the floor child.
type floorConfig struct {
	portsFile string
	client    string
	period    time.Duration
	duration  time.Duration
	warmup    time.Duration
	windows   int
}

func (c *floorConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.portsFile, "ports-file", "", "JSON file of the targets' ports, one per target (a port may repeat)")
	fs.StringVar(&c.client, "client", floorNetHTTP, "the client: "+floorNetHTTP+" (a shared Transport) or "+floorSocket+" (a connection per target, a request built once, bufio)")
	fs.DurationVar(&c.period, "period", time.Second, "request period per target")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured window")
	fs.DurationVar(&c.warmup, "warmup", 3*time.Second, "warm-up before the window")
	fs.IntVar(&c.windows, "windows", 1, "consecutive windows measured; the median one is reported")
}

func (c *floorConfig) args() []string {
	return []string{
		"--ports-file=" + c.portsFile,
		"--client=" + c.client,
		"--period=" + c.period.String(),
		"--duration=" + c.duration.String(),
		"--warmup=" + c.warmup.String(),
		"--windows=" + strconv.Itoa(c.windows),
	}
}

// runE2EFloor is the hidden floor child: per target, a goroutine GETs it
// every period (from a random phase) with the client of --client — one
// shared keep-alive http.Transport, or a connection of its own and a
// request built once — reads the body and checks the status and body. It
// measures its own CPU (getrusage) over the window.
func runE2EFloor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(e2eFloorCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg floorConfig
	cfg.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	b, err := os.ReadFile(cfg.portsFile)
	if err != nil {
		return err
	}
	var hello targetsHello
	if err := json.Unmarshal(b, &hello); err != nil {
		return fmt.Errorf("%s: %w", cfg.portsFile, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One idle connection per target: as many per port as share it.
	perPort := map[int]int{}
	for _, p := range hello.Ports {
		perPort[p]++
	}
	tr := &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: max(1, slices.Max(slices.Collect(maps.Values(perPort)))),
		IdleConnTimeout: 90 * time.Second}
	hc := &http.Client{Transport: tr}
	var requests, failed atomic.Int64
	for _, port := range hello.Ports {
		var get func() bool
		switch cfg.client {
		case floorNetHTTP:
			url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
			get = func() bool { return floorGet(ctx, hc, url) }
		case floorSocket:
			get = newSocketClient(fmt.Sprintf("127.0.0.1:%d", port)).get
		default:
			return fmt.Errorf("--client %q: want %s or %s", cfg.client, floorNetHTTP, floorSocket)
		}
		go floorLoop(ctx, get, cfg.period, &requests, &failed)
	}
	if err := sleep(ctx, cfg.warmup); err != nil {
		return err
	}
	windows := make([]e2eResult, max(cfg.windows, 1))
	for i := range windows {
		u0, err := ReadUsage()
		if err != nil {
			return err
		}
		n0, f0, t0 := requests.Load(), failed.Load(), time.Now()
		if err := sleep(ctx, cfg.duration); err != nil {
			return err
		}
		u1, err := ReadUsage()
		if err != nil {
			return err
		}
		n1, window := requests.Load(), time.Since(t0)
		windows[i] = newE2EResult(u1.CPUSince(u0), n1-n0, expectedProbes(len(hello.Ports), window, cfg.period), window, u1.MaxRSS)
		windows[i].Failed = failed.Load() - f0
	}
	// The loops are left running: the process exits once the line is out.
	return writeJSONLine(stdout, medianWindow(windows))
}

// floorLoop calls get every period until ctx is done.
func floorLoop(ctx context.Context, get func() bool, period time.Duration, requests, failed *atomic.Int64) {
	if sleep(ctx, rand.N(period)) != nil {
		return
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if !get() {
			failed.Add(1)
		}
		requests.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// floorGet makes one request and reports whether it got 200 and the body.
func floorGet(ctx context.Context, hc *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 10<<10))
	_ = resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK && string(body) == targetBody
}

// socketClient GETs /healthz of one target over a connection of its own,
// kept alive: the request is built once, the status line and header are
// parsed with bufio, the body read by its Content-Length.
type socketClient struct {
	addr    string
	request []byte
	conn    net.Conn
	br      *bufio.Reader
}

func newSocketClient(addr string) *socketClient {
	return &socketClient{
		addr:    addr,
		request: []byte("GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: probed-bench\r\nAccept: */*\r\n\r\n"),
	}
}

// get makes one request and reports whether it got 200 and the body; on
// an error it closes the connection (the next get dials again).
func (c *socketClient) get() bool {
	if c.conn == nil {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			return false
		}
		c.conn, c.br = conn, bufio.NewReader(conn)
	}
	ok, keep := c.exchange()
	if !keep {
		_ = c.conn.Close()
		c.conn = nil
	}
	return ok
}

func (c *socketClient) exchange() (ok, keep bool) {
	if _, err := c.conn.Write(c.request); err != nil {
		return false, false
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil || len(line) < len("HTTP/1.1 200") {
		return false, false
	}
	status := string(line[9:12])
	length := -1
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return false, false
		}
		if len(h) <= 2 { // the empty line
			break
		}
		if k, v, ok := bytes.Cut(h, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if length < 0 || length > 10<<10 {
		return false, false
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(c.br, body); err != nil {
		return false, false
	}
	return status == "200" && string(body) == targetBody, true
}

// isChildCommand reports whether name is a hidden subcommand, one that
// the benchmarks run in their child processes (tests dispatch them in
// TestMain).
func isChildCommand(name string) bool {
	for _, c := range commands {
		if c.name == name {
			return c.summary == ""
		}
	}
	return false
}
