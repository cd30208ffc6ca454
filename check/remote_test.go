package check_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine/probe"
)

// remoteEnv makes the test binary serve remoteTargets instead of running
// tests (TestMain).
const remoteEnv = "PROBED_CHECK_REMOTE_TARGETS"

// remoteTargets are probe targets served by another process: this test
// binary, started again with remoteEnv set. A test that counts this
// process's goroutines, or a benchmark that measures its CPU, then sees
// the checkers' alone. Every address answers HTTP/1.1 "ok" (HTTPS with a
// self-signed certificate) or gRPC health SERVING.
type remoteTargets struct {
	HTTP  string `json:"http"`
	HTTPS string `json:"https"`
	GRPC  string `json:"grpc"`
}

// startRemote starts the targets' process; it ends with the test.
func startRemote(tb testing.TB) remoteTargets {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), remoteEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close() // the process ends when its stdin does
		_ = cmd.Wait()
	})
	var r remoteTargets
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		tb.Fatalf("remote targets: %v", err)
	}
	if err := json.Unmarshal(line, &r); err != nil {
		tb.Fatalf("remote targets: %v: %q", err, line)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return r
}

// serveRemote is the targets' process: it prints their addresses as one
// JSON line and serves until its stdin is closed.
func serveRemote() int {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: ok, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	tlsSrv := httptest.NewUnstartedServer(ok)
	tlsSrv.StartTLS()
	glis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer()) // "" is SERVING
	go func() { _ = g.Serve(glis) }()

	r := remoteTargets{HTTP: lis.Addr().String(), HTTPS: tlsSrv.Listener.Addr().String(), GRPC: glis.Addr().String()}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	g.Stop()
	tlsSrv.Close()
	_ = srv.Close()
	return 0
}

// checkerKind is one kind of checker in one of its modes.
type checkerKind struct {
	name    string
	opts    check.Options
	handler func() probe.Handler // a fresh spec for each Open
	// shared: the checkers of one Set share one connection to the
	// address, which holds grpc-go's goroutines while it is up, however
	// many checkers share it.
	shared bool
}

// kinds are the checkers of every kind, in their default modes and with a
// connection per check, aimed at r's targets.
func (r remoteTargets) kinds(tb testing.TB) []checkerKind {
	httpHost, httpPort := hostPort(tb, r.HTTP)
	tlsHost, tlsPort := hostPort(tb, r.HTTPS)
	grpcHost, grpcPort := hostPort(tb, r.GRPC)
	return []checkerKind{
		{name: "HTTP kept alive", handler: func() probe.Handler {
			return probe.Handler{HTTPGet: &probe.HTTPGet{Host: httpHost, Port: httpPort}}
		}},
		{name: "HTTP, a connection per check", handler: func() probe.Handler {
			return probe.Handler{HTTPGet: &probe.HTTPGet{Host: httpHost, Port: httpPort, DisableKeepAlive: true}}
		}},
		{name: "HTTPS kept alive", handler: func() probe.Handler {
			return probe.Handler{HTTPGet: &probe.HTTPGet{Host: tlsHost, Port: tlsPort, Scheme: probe.SchemeHTTPS, TLS: &probe.TLS{InsecureSkipVerify: true}}}
		}},
		{name: "TCP", handler: func() probe.Handler {
			return probe.Handler{TCPSocket: &probe.TCPSocket{Host: httpHost, Port: httpPort}}
		}},
		{name: "gRPC, a channel per check", opts: check.Options{GRPCDialPerProbe: true}, handler: func() probe.Handler {
			return probe.Handler{GRPC: &probe.GRPC{Host: grpcHost, Port: grpcPort}}
		}},
		{name: "gRPC, a shared channel", shared: true, handler: func() probe.Handler {
			return probe.Handler{GRPC: &probe.GRPC{Host: grpcHost, Port: grpcPort}}
		}},
		{name: "exec", opts: check.Options{AllowExec: true}, handler: func() probe.Handler {
			return probe.Handler{Exec: &probe.Exec{Command: []string{"true"}}}
		}},
	}
}
