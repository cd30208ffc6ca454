// Package netns runs a program inside a network namespace of its own
// (unshare -n, with -r when not root: no privilege needed), whose loopback
// interface also carries a pod range: the kube tests and the demo give
// pods addresses there that are not 127.0.0.x (the API server refuses
// loopback addresses in EndpointSlices), and nothing outside the
// namespace is reachable from it.
package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// Reexec runs this program again, with the same arguments, inside a new
// network namespace, with the environment variable env set to 1 (see
// Inside) and files passed on as its file descriptors 3, 4, ...; it
// returns its exit code. An error means namespaces are not allowed here.
// The child shares the caller's terminal: a Ctrl-C reaches both, and the
// caller should ignore it and let Reexec return.
func Reexec(env string, files ...*os.File) (int, error) {
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
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // it ends with this process
	err = cmd.Run()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 1, fmt.Errorf("run in a network namespace: %w", err)
	}
	return 0, nil
}

// Inside reports whether this process is the one Reexec started.
func Inside(env string) bool { return os.Getenv(env) == "1" }

// SetUpLoopback brings the namespace's loopback up with cidr on it (e.g.
// 10.244.0.1/16: the addresses of the range are then local), and sizes
// the namespace's accept queues for a pod network (Backlog, where the
// kernel lets it: otherwise a line on stderr says so). Call it
// before this process listens on anything: Go reads the queue size once,
// at its first listen.
func SetUpLoopback(cidr string) error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", cidr, "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	for _, key := range []string{"net/core/somaxconn", "net/ipv4/tcp_max_syn_backlog"} {
		if err := os.WriteFile("/proc/sys/"+key, []byte(strconv.Itoa(Backlog)), 0); err != nil {
			// Only the largest runs need it: go on with the default.
			fmt.Fprintf(os.Stderr, "netns: the pod network keeps the default accept queue (%s: %v)\n", key, err)
		}
	}
	return nil
}

// Backlog is the accept queue of every listener in the namespace
// (net.core.somaxconn, and net.ipv4.tcp_max_syn_backlog for the
// handshakes before it). The stand-in's pod network is one listener for
// every pod IP, where a cluster has one per pod, each with a queue of its
// own (4,096 by default): with the default, 10,000 pods probed every
// 100 ms until ready overflow that one queue, dropped handshakes wait a
// second for their retransmission, and probes time out in the stand-in,
// not in probed (issue 31's 10,000-pod run: TcpExtListenOverflows).
const Backlog = 65535
