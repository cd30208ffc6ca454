// Package kubetest runs a test binary of the kube module against a real
// control plane (package controlplane) inside a network namespace of its
// own, whose loopback interface also carries the pod range PodCIDR: the
// API server refuses loopback addresses in EndpointSlices, so pods need
// addresses that are not 127.0.0.x, and nothing outside the namespace is
// reachable from it.
//
// A test package calls Main from TestMain, and each test calls Get:
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		env := kubetest.Get(t) // skips loudly where the plane cannot run
//		...
//	}
//
// Where the binaries are missing (`make kube-bins` builds them) or network
// namespaces are not allowed, the tests skip with a loud message, unless
// PROBED_REQUIRE_KUBE=1 or CI=true, which fail them instead; a skip is
// listed at the end of `make test` (internal/ciskip).
package kubetest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes"

	"github.com/probed/probed/internal/ciskip"

	"github.com/probed/probed/kube/internal/controlplane"
	"github.com/probed/probed/kube/internal/netns"
	"github.com/probed/probed/kube/internal/release"
)

// PodCIDR is the range of pod IPs on the namespace's loopback interface.
const PodCIDR = "10.244.0.1/16"

// Environment variables.
const (
	// envRequire=1 fails the tests where the plane cannot run.
	envRequire = "PROBED_REQUIRE_KUBE"
	// envInside marks the re-executed test binary inside its namespace.
	envInside = "PROBED_KUBE_NETNS"
)

// Env is the control plane the tests of a binary share.
type Env struct {
	Plane *controlplane.Plane
	// Admin is a clientset of the plane with every permission.
	Admin *kubernetes.Clientset
}

var (
	shared  *Env
	skipMsg string // why the tests skip, when shared is nil
)

// Option tunes Main.
type Option func(*mainOptions)

type mainOptions struct {
	leaks  bool
	ignore []goleak.Option
	helm   bool
}

// WithHelm makes Main resolve the pinned helm (release.HelmBinary)
// before it enters the network namespace, where the go command cannot
// reach the module proxy to build it on a machine that never did, and
// hand its path to the tests (release.HelmEnv).
func WithHelm() Option {
	return func(o *mainOptions) { o.helm = true }
}

// WithLeakCheck makes Main fail the binary when goroutines the tests
// started outlive them (goleak, after every test passed), but for those
// running before the first test (the control plane's) and ignore.
func WithLeakCheck(ignore ...goleak.Option) Option {
	return func(o *mainOptions) { o.leaks, o.ignore = true, ignore }
}

// resolveHelm returns the path of the pinned helm, built if it must be.
func resolveHelm() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := release.Root(ctx)
	if err != nil {
		return "", err
	}
	return release.HelmBinary(ctx, root)
}

// Main runs the tests: it re-executes the test binary inside a new network
// namespace (unshare -n, with -r when not root), where it starts the
// control plane once for every test and stops it at the end. It returns
// the exit code.
func Main(m *testing.M, opts ...Option) int {
	var o mainOptions
	for _, opt := range opts {
		opt(&o)
	}
	required := ciskip.Required(envRequire)
	skip := func(msg string) int {
		if required {
			fmt.Fprintf(os.Stderr, "kubetest: %s, and %s=1 requires the control plane\n", msg, envRequire)
			return 1
		}
		skipMsg = msg
		fmt.Fprintf(os.Stderr, "\n*** kubetest: SKIPPING the tests that need Kubernetes: %s ***\n\n", msg)
		return m.Run()
	}
	bin, missing := controlplane.BinDir()
	if len(missing) > 0 {
		return skip(fmt.Sprintf("%v missing in %s (build them with `make kube-bins`, or set PROBED_KUBE_BIN)", missing, bin))
	}
	if !netns.Inside(envInside) {
		if o.helm && os.Getenv(release.HelmEnv) == "" {
			helm, err := resolveHelm()
			if err != nil {
				fmt.Fprintln(os.Stderr, "kubetest:", err)
				return 1
			}
			if err := os.Setenv(release.HelmEnv, helm); err != nil {
				fmt.Fprintln(os.Stderr, "kubetest:", err)
				return 1
			}
		}
		code, err := netns.Reexec(envInside)
		if err != nil {
			return skip(err.Error())
		}
		return code
	}
	if err := netns.SetUpLoopback(PodCIDR); err != nil {
		return skip(err.Error())
	}
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubetest:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	ctx := context.Background()
	start := time.Now()
	plane, err := controlplane.Start(ctx, bin, dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: start the control plane: %v\n", err)
		return 1
	}
	defer plane.Stop()
	admin, err := kubernetes.NewForConfig(plane.Config(controlplane.Admin))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubetest:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "kubetest: control plane %s ready in %v at %s\n", controlplane.Version, time.Since(start).Round(time.Millisecond), plane.URL)
	shared = &Env{Plane: plane, Admin: admin}
	leakOpts := append(o.ignore, goleak.IgnoreCurrent())
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, plane.Logs(30))
	}
	if code == 0 && o.leaks {
		if err := goleak.Find(leakOpts...); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	return code
}

// Get returns the shared control plane, or skips the test (loudly) where
// there is none.
func Get(t testing.TB) *Env {
	t.Helper()
	if shared == nil {
		if skipMsg == "" {
			t.Fatal("kubetest: no control plane: call kubetest.Main from TestMain")
		}
		ciskip.Missing(t, envRequire, "no Kubernetes control plane: "+skipMsg)
	}
	return shared
}

// PodIP returns the i-th pod address of PodCIDR (i from 0 to 64,000).
func PodIP(i int) string {
	i += 2 // .0.0 is the network, .0.1 the node
	return fmt.Sprintf("10.244.%d.%d", i/256, i%256)
}
