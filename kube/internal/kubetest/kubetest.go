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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/probed/probed/internal/ciskip"

	"github.com/probed/probed/kube/internal/controlplane"
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

// Main runs the tests: it re-executes the test binary inside a new network
// namespace (unshare -n, with -r when not root), where it starts the
// control plane once for every test and stops it at the end. It returns
// the exit code.
func Main(m *testing.M) int {
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
	if os.Getenv(envInside) != "1" {
		code, err := reexec()
		if err != nil {
			return skip(err.Error())
		}
		return code
	}
	if err := setUpLoopback(); err != nil {
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
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, plane.Logs(30))
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

// reexec runs the test binary again, with the same arguments, inside a new
// network namespace, and returns its exit code. An error means namespaces
// are not allowed here.
func reexec() (int, error) {
	args := []string{"-n"}
	if os.Geteuid() != 0 {
		args = append(args, "-r") // map the user to root in a new user namespace
	}
	if out, err := exec.Command("unshare", append(args, "true")...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("network namespaces are not allowed here (unshare %s true: %w: %s)", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command("unshare", append(append(args, "--", self), os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envInside+"=1")
	err = cmd.Run()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 1, fmt.Errorf("run the tests in a network namespace: %w", err)
	}
	return 0, nil
}

// setUpLoopback brings the namespace's loopback up with PodCIDR on it.
func setUpLoopback() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", PodCIDR, "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// PodIP returns the i-th pod address of PodCIDR (i from 0 to 64,000).
func PodIP(i int) string {
	i += 2 // .0.0 is the network, .0.1 the node
	return fmt.Sprintf("10.244.%d.%d", i/256, i%256)
}
