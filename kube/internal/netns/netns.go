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
// 10.244.0.1/16: the addresses of the range are then local).
func SetUpLoopback(cidr string) error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", cidr, "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
