package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/internal/refused"
)

// The README's examples, run verbatim (only the ports differ) against
// probed started with the flags `make run` passes, in the README's order:
// the grpcurl session, the probectl session, the examples of `probectl
// COMMAND --help`, and the Go client program built from a module that
// depends on this one the way the README says.

// readmePorts are the ports the README's examples use, and what they are.
const (
	readmeAPIPort     = "50051" // make run's ADDR
	readmeUIPort      = "8080"  // make run's UI_ADDR
	readmeBackendPort = "8081"  // where nothing listens (examples/targets/backend.yaml)
	readmeXDSPort     = "18000" // make run's XDS_ADDR
)

// readmeEnv is probed started as `make run` starts it, and how the
// README's ports map to the test's.
type readmeEnv struct {
	root    string
	addr    string            // the API's address
	xdsAddr string            // the xDS server's address
	ports   map[string]string // README port -> the test's port
	sandbox string            // bin/probectl and examples/targets, ports replaced
}

func TestREADME(t *testing.T) {
	root := moduleRoot(t)
	ui := refused.Reserve(t)
	xdsAddr := refused.Reserve(t)
	backend := strconv.Itoa(int(refused.Port(t))) // refuses connections
	cfg := makeRunConfig(t, root, map[string]string{
		"ADDR":         "127.0.0.1:0",
		"UI_ADDR":      ui.Addr(),
		"METRICS_ADDR": "127.0.0.1:0",
		"XDS_ADDR":     xdsAddr.Addr(),
		"DATA_DIR":     t.TempDir(),
	})
	addr := startServer(t, cfg)
	_, apiPort, _ := net.SplitHostPort(addr)
	e := &readmeEnv{
		root:    root,
		addr:    addr,
		xdsAddr: xdsAddr.Addr(),
		ports: map[string]string{
			readmeAPIPort:     apiPort,
			readmeUIPort:      strconv.Itoa(int(ui.Port)),
			readmeBackendPort: backend,
			readmeXDSPort:     strconv.Itoa(int(xdsAddr.Port)),
		},
	}
	e.sandbox = e.makeSandbox(t)

	// In order: each step starts from what the one before left.
	for _, step := range []struct {
		name string
		run  func(*testing.T, *readmeEnv)
	}{
		{"grpcurl session", testGrpcurlSession},
		{"probectl session", testProbectlSession},
		{"probectl apply --prune session", testPruneSession},
		{"authorization session", testAuthzSession},
		{"probectl help examples", testProbectlHelpExamples},
		{"Go client", testGoClient},
		{"xDS client", testXDSClient},
		{"Envoy profile", testEnvoyProfile},
	} {
		if !t.Run(step.name, func(t *testing.T) { step.run(t, e) }) {
			return
		}
	}
}

// makeRunConfig returns the configuration `make run` gives probed with
// these variables: the flags of the probed command `make -n run` prints.
func makeRunConfig(t *testing.T, root string, vars map[string]string) *config {
	t.Helper()
	args := []string{"-n", "--no-print-directory", "run"}
	for k, v := range vars {
		args = append(args, k+"="+v)
	}
	cmd := exec.Command("make", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n run: %v", err)
	}
	var line string
	for l := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(l, "bin/probed ") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("make -n run prints no bin/probed command:\n%s", out)
	}
	// The shell splits the command as make's recipe would be split.
	split, err := exec.Command("sh", "-c", `printf '%s\0' `+strings.TrimPrefix(line, "bin/probed ")).Output()
	if err != nil {
		t.Fatalf("splitting %q: %v", line, err)
	}
	flags := strings.Split(strings.TrimSuffix(string(split), "\x00"), "\x00")
	t.Logf("make run: probed %q", flags)
	cfg, err := parseFlags(flags, io.Discard)
	if err != nil {
		t.Fatalf("make run's flags %q: %v", flags, err)
	}
	return cfg
}

// waitReady waits until the named target is ready: its first probes ran.
func (e *readmeEnv) waitReady(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WaitReady(ctx, name); err != nil {
		t.Fatalf("%s not ready: %v", name, err)
	}
}

// toTest replaces the README's ports by the test's in s.
func (e *readmeEnv) toTest(s string) string {
	for from, to := range e.ports {
		s = strings.ReplaceAll(s, from, to)
	}
	return s
}

// toREADME replaces the test's ports by the README's in s.
func (e *readmeEnv) toREADME(s string) string {
	for to, from := range e.ports {
		s = strings.ReplaceAll(s, from, to)
	}
	return s
}

// makeSandbox returns a directory laid out as the repository is for the
// README's commands: bin/probectl, and examples/targets with the test's
// ports.
func (e *readmeEnv) makeSandbox(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "probectl"), "./cmd/probectl")
	build.Dir = e.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/probectl: %v\n%s", err, out)
	}
	targets := filepath.Join(e.root, "examples", "targets")
	entries, err := os.ReadDir(targets)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "examples", "targets"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		b, err := os.ReadFile(filepath.Join(targets, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "examples", "targets", en.Name()), []byte(e.toTest(string(b))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// readmeStep is one command of a README console block and the lines it
// prints there.
type readmeStep struct {
	cmd    string
	output []string
	follow bool // the README stops it with Ctrl-C ("^C")
}

// fails reports whether the README shows the command failing.
func (s readmeStep) fails() bool {
	return slices.ContainsFunc(s.output, func(l string) bool {
		return strings.HasPrefix(l, "Error:") || strings.HasPrefix(l, "ERROR:")
	})
}

// readmeBlock returns the text of the README between "<!-- marker -->"
// and "<!-- /marker -->".
func readmeBlock(t *testing.T, root, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- "+marker+" -->")
	block, _, ok2 := strings.Cut(rest, "<!-- /"+marker+" -->")
	if !ok || !ok2 {
		t.Fatalf("README.md has no %s block", marker)
	}
	return block
}

// readmeSession returns the commands of a README console block.
func readmeSession(t *testing.T, root, marker string) []readmeStep {
	t.Helper()
	var steps []readmeStep
	for _, line := range strings.Split(readmeBlock(t, root, marker), "\n") {
		switch {
		case strings.HasPrefix(line, "$ "):
			steps = append(steps, readmeStep{cmd: strings.TrimPrefix(line, "$ ")})
		case strings.HasPrefix(line, "```"), line == "", len(steps) == 0:
		case line == "^C":
			steps[len(steps)-1].follow = true
		default:
			steps[len(steps)-1].output = append(steps[len(steps)-1].output, line)
		}
	}
	return steps
}

// testGrpcurlSession runs the README's grpcurl session: every line the
// README shows is in the output, and the Watch ends as the README says
// (DeadlineExceeded, exit status 68).
func testGrpcurlSession(t *testing.T, e *readmeEnv) {
	steps := readmeSession(t, e.root, "grpcurl-session")
	if len(steps) < 4 {
		t.Fatalf("README session has %d commands, want at least 4", len(steps))
	}
	var all strings.Builder
	for i, s := range steps {
		cmd := exec.Command("sh", "-c", e.toTest(s.cmd))
		cmd.Dir = e.root
		out, err := cmd.CombinedOutput()
		all.Write(out)
		code := exitCode(err)
		switch {
		case strings.Contains(s.cmd, "/Watch"):
			if code != 68 {
				t.Errorf("command %d: exit status %d, want 68 (DeadlineExceeded), as the README says\n%s\n%s", i, code, s.cmd, out)
			}
		case code != 0:
			t.Fatalf("command %d failed (%d):\n%s\n%s", i, code, s.cmd, out)
		}
		for _, want := range s.output {
			if want != "..." && !strings.Contains(e.toREADME(string(out)), want) {
				t.Errorf("command %d: output lacks the README's line %q:\n%s", i, want, out)
			}
		}
		if i == 1 { // created: GetTarget shows it probed, ready
			e.waitReady(t, "web")
		}
	}
	for _, want := range []string{
		`"period": "0.100s"`,           // 1s - 900ms, what the README promises
		`"result": "RESULT_SUCCESS"`,   // probed probing its own port
		`"kind": "EVENT_KIND_CREATED"`, // the Watch replay
		`"kind": "EVENT_KIND_TRANSITION"`,
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("session output lacks %s:\n%s", want, all.String())
		}
	}
}

// testProbectlSession runs the README's probectl session in the sandbox:
// each command prints what the README shows, but for times, durations and
// counts of runs, and the column widths.
func testProbectlSession(t *testing.T, e *readmeEnv) {
	e.runSession(t, "probectl-session", 6)
}

// testPruneSession runs the README's `probectl apply --prune` session in
// the sandbox, as testProbectlSession does.
func testPruneSession(t *testing.T, e *readmeEnv) {
	e.runSession(t, "probectl-prune-session", 4)
}

// testAuthzSession writes the README's policy to policy.yaml in the
// sandbox and runs its authorization session there: the probed command
// it starts in the background runs in this process (its port mapped, its
// files in the sandbox), the others as testProbectlSession runs them.
func testAuthzSession(t *testing.T, e *readmeEnv) {
	policy := readmeBlock(t, e.root, "authz-policy")
	policy = strings.TrimPrefix(strings.TrimSpace(policy), "```yaml")
	policy = strings.TrimSuffix(policy, "```")
	if err := os.WriteFile(filepath.Join(e.sandbox, "policy.yaml"), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	e.runSession(t, "authz-session", 4)
}

// runSession runs the console block marker (at least min commands) in the
// sandbox. A command "probed ARGS &" starts probed in this process with
// ARGS (files relative to the sandbox; its --addr port mapped to a free
// one) for the commands after it.
func (e *readmeEnv) runSession(t *testing.T, marker string, minSteps int) {
	t.Helper()
	steps := readmeSession(t, e.root, marker)
	if len(steps) < minSteps {
		t.Fatalf("README session %s has %d commands, want at least %d", marker, len(steps), minSteps)
	}
	for i, s := range steps {
		if args, ok := strings.CutPrefix(s.cmd, "probed "); ok && strings.HasSuffix(args, " &") {
			e.startReadmeProbed(t, strings.Fields(strings.TrimSuffix(args, " &")))
			continue
		}
		out, code := e.shell(t, s.cmd, len(s.output), s.follow)
		switch {
		case s.fails() && code == 0:
			t.Errorf("command %d succeeded; the README shows it failing:\n%s\n%s", i, s.cmd, out)
		case !s.fails() && code != 0:
			t.Fatalf("command %d failed (%d):\n%s\n%s", i, code, s.cmd, out)
		}
		got := e.toREADME(out)
		if diff := cmp.Diff(normalize(s.output), normalize(lines(got))); diff != "" {
			t.Errorf("command %d, %s: output differs from the README (-README +got):\n%s\ngot:\n%s", i, s.cmd, diff, got)
		}
	}
}

// startReadmeProbed starts probed with a README command's args: files
// relative to the sandbox, the --addr port mapped to a free port, no
// metrics or status page listener, a data dir of the test's.
func (e *readmeEnv) startReadmeProbed(t *testing.T, args []string) {
	t.Helper()
	var readmePort string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--addr":
			_, readmePort, _ = net.SplitHostPort(args[i+1])
			args[i+1] = "127.0.0.1:0"
		case "--auth-token-file", "--authz-policy":
			args[i+1] = filepath.Join(e.sandbox, args[i+1])
		}
	}
	args = append(args, "--metrics-addr=", "--ui-addr=", "--data-dir", t.TempDir(), "--log-level", "warn")
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("probed %q: %v", args, err)
	}
	_, port, _ := net.SplitHostPort(startServer(t, cfg))
	e.ports[readmePort] = port
}

// volatile are what changes from run to run in probectl's output.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`), "<time>"},
	{regexp.MustCompile(`\b(\d+(\.\d+)?(ns|µs|us|ms|s|m|h|d))+\b`), "<duration>"},
	{regexp.MustCompile(`\b\d+ failures? in a row`), "<n> failures in a row"},
	{regexp.MustCompile(`[ \t]+`), " "},
}

// normalize masks what varies between runs in each line.
func normalize(ls []string) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		for _, v := range volatile {
			l = v.re.ReplaceAllString(l, v.with)
		}
		out[i] = strings.TrimSpace(l)
	}
	return out
}

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// shell runs a README command line in the sandbox with probectl pointed
// at probed and on the PATH, and returns its stdout and stderr together
// and its exit status. A follow command runs until it has printed n
// lines, then gets SIGINT, as Ctrl-C sends.
func (e *readmeEnv) shell(t *testing.T, line string, n int, follow bool) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	line = e.toTest(line)
	if follow {
		line = "exec " + line // SIGINT goes to the command, not a shell
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = e.sandbox
	cmd.Env = append(os.Environ(), "PROBED_ADDR="+e.addr, "PATH="+filepath.Join(e.sandbox, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if !follow {
		out, err := cmd.CombinedOutput()
		return string(out), exitCode(err)
	}
	var out probedproc.Log // stdout and stderr, copied by two goroutines
	cmd.Stderr = &out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for got := 0; got < n && sc.Scan(); got++ {
		_, _ = out.Write(append(sc.Bytes(), '\n'))
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	_, _ = io.Copy(&out, stdout)
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%s: no %d lines within a minute:\n%s", line, n, out.String())
	}
	return out.String(), exitCode(err)
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		return -1
	}
}

// testProbectlHelpExamples runs the example of every probectl command, as
// `probectl COMMAND --help` prints it, in the order `probectl --help`
// lists the commands.
func testProbectlHelpExamples(t *testing.T, e *readmeEnv) {
	help, _ := e.shell(t, "probectl --help", 0, false)
	_, list, ok := strings.Cut(help, "Available Commands:\n")
	if !ok {
		t.Fatalf("probectl --help lists no commands:\n%s", help)
	}
	ran := 0
	for line := range strings.SplitSeq(list, "\n") {
		if strings.TrimSpace(line) == "" {
			break
		}
		name := strings.Fields(line)[0]
		cmdHelp, code := e.shell(t, "probectl "+name+" --help", 0, false)
		if code != 0 {
			t.Fatalf("probectl %s --help: %d\n%s", name, code, cmdHelp)
		}
		_, ex, ok := strings.Cut(cmdHelp, "\nExamples:\n")
		if !ok {
			continue
		}
		ex, _, _ = strings.Cut(ex, "\n\n")
		var b strings.Builder
		for l := range strings.SplitSeq(ex, "\n") {
			b.WriteString(strings.TrimPrefix(l, "  ") + "\n")
		}
		example := strings.TrimSpace(b.String())
		follow := name == "watch"
		out, code := e.shell(t, example, 1, follow)
		if code != 0 {
			t.Errorf("the example of probectl %s failed (%d):\n%s\n%s", name, code, example, out)
		}
		ran++
	}
	if ran < 6 {
		t.Errorf("ran %d examples, want one for every command", ran)
	}
}

// testGoClient depends on the module from outside, as the README says
// (go mod edit -replace with a clone next to the module), and builds and
// runs the README's program against probed. It needs no network and no
// more of the module cache than this test's own build put there: the
// README's go mod tidy runs with -e. Tidy also resolves the imports of
// the tests of every package the program imports (grpc's tests import
// gonum), which only the proxy may have; -e lets it write the
// requirements it did resolve, all the build needs.
func testGoClient(t *testing.T, e *readmeEnv) {
	dir := t.TempDir()
	if err := os.Symlink(e.root, filepath.Join(dir, "probed")); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(dir, "app")
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	program := readmeBlock(t, e.root, "go-client-program")
	program = strings.TrimPrefix(strings.TrimSpace(program), "```go")
	program = strings.TrimSuffix(program, "```")
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(e.toTest(program)), 0o600); err != nil {
		t.Fatal(err)
	}
	goEnv := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
	run := func(line string) string {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = app
		cmd.Env = goEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return string(out)
	}
	run("go mod init example.com/app") // "your module"
	steps := readmeSession(t, e.root, "go-client-setup")
	if len(steps) != 2 || steps[1].cmd != "go mod tidy" {
		t.Fatalf("README's Go client setup is %+v, want two commands, the second go mod tidy", steps)
	}
	run(steps[0].cmd)
	run("go mod tidy -e")
	if mod := run("cat go.mod"); !strings.Contains(mod, "github.com/probed/probed v0.0.0-00010101000000-000000000000") {
		t.Errorf("go.mod after the README's steps:\n%s\nwant the require the README names", mod)
	}
	run("go build -o app .")
	if out := run("./app"); out != "from-go ready, readiness period 100ms\n" {
		t.Errorf("the README's program printed %q, want what the README says", out)
	}
}
