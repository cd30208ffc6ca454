// Package probedproc runs the real probed binary as a child process: the
// binary built from this repository (Build), the flags a build knows
// (Flags, so that an older build can be run too), the process itself
// (Process: started, served, killed, stopped, paused, its log kept) and
// the moment it serves (Serving). It is the one harness of probed as a
// process: the process tests of cmd/probed, the cluster soak
// (internal/clustersoak), the status page's browser test and the
// benchmarks (bench/) share it; etcd for them comes from
// internal/etcdtest.
package probedproc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// module is the main module, whose cmd/probed Build builds.
const module = "github.com/probed/probed"

// Build builds cmd/probed of this repository into dir, without the race
// detector (it is the process under test or measurement, not the test),
// and returns its path. It runs the go command in the directory of the
// main module, which it asks go list from the working directory: the
// repository, or a module that requires it (bench/ and kube/ replace it
// with ../), so that probed is built with its own go.mod's versions. The
// build cache makes a second build a link.
func Build(ctx context.Context, dir string, out io.Writer) (string, error) {
	return BuildVersion(ctx, dir, "", out)
}

// BuildVersion is Build with the binary's version (what probed --version
// and its probes' User-Agent say) stamped; "" keeps the default.
func BuildVersion(ctx context.Context, dir, version string, out io.Writer) (string, error) {
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		return "", fmt.Errorf("finding %s (run inside the repository): %w", module, err)
	}
	bin := filepath.Join(dir, "probed")
	args := []string{"build", "-o", bin}
	if version != "" {
		args = append(args, "-ldflags", "-X main.version="+version)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/probed")...)
	cmd.Dir = strings.TrimSpace(string(root))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/probed in %s: %w", cmd.Dir, err)
	}
	return bin, nil
}

// Flags returns the names of the flags bin accepts, from its -h output.
func Flags(ctx context.Context, bin string) (map[string]bool, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-h")
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // -h may exit with 0 or 2
	flags := map[string]bool{}
	for _, m := range flagLine.FindAllSubmatch(out.Bytes(), -1) {
		flags[string(m[1])] = true
	}
	if !flags["addr"] {
		return nil, fmt.Errorf("%s -h lists no --addr flag; is it probed? output:\n%s", bin, out.Bytes())
	}
	return flags, nil
}

// flagLine matches a flag in the flag package's usage output.
var flagLine = regexp.MustCompile(`(?m)^\s+-{1,2}([a-z][a-z0-9-]*)`)

// ServingLog is what probed logs once its gRPC server serves (in the
// text and the JSON format alike), at level INFO but whatever its
// --log-level: a probed started with --log-level warn is seen serving too.
const ServingLog = "probed serving"

// Serving is a writer for probed's log (its stderr) whose Done channel is
// closed once ServingLog has been written. It keeps no more of the log
// than a line that has not ended.
type Serving struct {
	mu   sync.Mutex
	done chan struct{}
	line []byte // the part of the current line written so far
	seen bool
}

// NewServing returns a Serving that has seen nothing yet.
func NewServing() *Serving { return &Serving{done: make(chan struct{})} }

// Done is closed once probed has logged that it serves.
func (s *Serving) Done() <-chan struct{} { return s.done }

func (s *Serving) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen {
		return len(b), nil
	}
	s.line = append(s.line, b...)
	if bytes.Contains(s.line, []byte(ServingLog)) {
		s.seen, s.line = true, nil
		close(s.done)
		return len(b), nil
	}
	if i := bytes.LastIndexByte(s.line, '\n'); i >= 0 {
		s.line = append(s.line[:0], s.line[i+1:]...)
	}
	return len(b), nil
}
