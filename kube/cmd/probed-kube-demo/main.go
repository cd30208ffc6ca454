// Command probed-kube-demo is `make kube-demo`: a Kubernetes control
// plane to try probed-kube on, with no cluster and no container runtime.
//
// It runs the real kube-apiserver, etcd and kube-controller-manager that
// `make kube-bins` built, a scheduler stand-in and the kubelet stand-in
// of the tests, and probed and probed-kube with exactly the flags, files
// and RBAC of the Helm chart (deploy/helm/probed, rendered by the pinned
// helm). It applies examples/kubernetes/web.yaml: the Deployment's pods
// are served by real HTTP servers at their pod IPs, in a network
// namespace of the demo's own. Every few seconds one of them flips
// between healthy and failing, and the demo prints how long the flip
// took to reach the pod's condition probed.io/ready and its Service's
// EndpointSlice. kubectl works against it (the demo prints the
// KUBECONFIG to use). Ctrl-C stops everything.
//
//	probed-kube-demo [--flip-every 3s] [--flips N] [--api-addr 127.0.0.1:6443]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/kube/internal/controlplane"
	"github.com/probed/probed/kube/internal/netns"
	"github.com/probed/probed/kube/internal/release"
)

// envInside marks the demo re-executed inside its network namespace.
const envInside = "PROBED_KUBE_DEMO_NETNS"

// options are the command line's.
type options struct {
	flipEvery time.Duration
	flips     int    // stop after this many flips (0: run until Ctrl-C)
	apiAddr   string // where kubectl reaches the API server, outside the namespace
	dir       string // the demo's files ("": a new temporary directory)
}

func main() {
	o := &options{}
	flag.DurationVar(&o.flipEvery, "flip-every", 3*time.Second, "flip one web pod's health this often")
	flag.IntVar(&o.flips, "flips", 0, "stop after this many flips (0: until Ctrl-C)")
	flag.StringVar(&o.apiAddr, "api-addr", "127.0.0.1:0", "address where kubectl reaches the API server (port 0: any free port)")
	flag.StringVar(&o.dir, "dir", "", "directory of the demo's files, logs and kubeconfig (default: a new temporary one)")
	flag.Parse()
	var err error
	if netns.Inside(envInside) {
		err = inside(o)
	} else {
		err = outside(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probed-kube-demo:", err)
		os.Exit(1)
	}
}

// outside prepares what needs the network or the go command (the
// binaries, the rendered chart), opens kubectl's listener, and runs the
// demo again inside a network namespace of its own, passing it both.
func outside(o *options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, missing := controlplane.BinDir()
	if len(missing) > 0 {
		return fmt.Errorf("%v missing in %s: run `make kube-bins` first", missing, bin)
	}
	root, err := release.Root(ctx)
	if err != nil {
		return err
	}
	if o.dir == "" {
		if o.dir, err = os.MkdirTemp("", "probed-kube-demo-"); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(o.dir, "bin"), 0o755); err != nil {
		return err
	}
	fmt.Printf("demo: building probed and probed-kube into %s/bin ...\n", o.dir)
	if _, err := probedproc.Build(ctx, filepath.Join(o.dir, "bin"), os.Stderr); err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(o.dir, "bin", "probed-kube"), "./cmd/probed-kube")
	build.Dir, build.Stdout, build.Stderr = filepath.Join(root, "kube"), os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/probed-kube: %w", err)
	}
	fmt.Println("demo: rendering the chart with the pinned helm ...")
	r, err := release.Render(ctx, root, releaseName, namespace, chartValues()...)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.dir, "chart.yaml"), r.Manifests, 0o600); err != nil {
		return err
	}
	web, err := os.ReadFile(filepath.Join(root, "examples", "kubernetes", "web.yaml"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.dir, "web.yaml"), web, 0o600); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", o.apiAddr)
	if err != nil {
		return fmt.Errorf("kubectl's listener: %w", err)
	}
	f, err := lis.(*net.TCPListener).File()
	_ = lis.Close() // f is a duplicate, kept open for the child
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	// The child gets the terminal's Ctrl-C itself and stops everything;
	// this process waits for it.
	stop()
	signal.Notify(make(chan os.Signal, 1), os.Interrupt) // caught, not ignored: the child must not inherit SIG_IGN
	os.Args = append(os.Args, "--dir="+o.dir, "--api-addr="+lis.Addr().String())
	code, err := netns.Reexec(envInside, f)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("the demo exited with %d (its logs are in %s)", code, o.dir)
	}
	return nil
}

// inside runs the demo in its network namespace until Ctrl-C (or
// --flips flips), then stops every process it started and waits for them.
func inside(o *options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := netns.SetUpLoopback(podCIDR); err != nil {
		return err
	}
	lis, err := net.FileListener(os.NewFile(3, "kubectl"))
	if err != nil {
		return fmt.Errorf("kubectl's listener: %w", err)
	}
	d := &demo{opts: o, out: os.Stdout, kubectl: lis}
	err = d.run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// logf prints one line of the demo's.
func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}
