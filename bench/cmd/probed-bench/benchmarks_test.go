package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/internal/etcdtest"
)

// benchmarksFile is BENCHMARKS.md, from this package's directory.
const benchmarksFile = "../../../BENCHMARKS.md"

// documented is one probed-bench command of BENCHMARKS.md.
type documented struct {
	line int      // of BENCHMARKS.md, where it starts
	args []string // the command and its flags, as written
}

func (d documented) String() string {
	return fmt.Sprintf("line %d: %s", d.line, strings.Join(d.args, " "))
}

// benchBinary is how BENCHMARKS.md names a probed-bench binary:
// bin/probed-bench, ./cmd/probed-bench (go run), or a copy such as
// /tmp/w26/bench2.
var benchBinary = regexp.MustCompile(`^(.*/)?(probed-bench|bench[0-9]*)$`)

// forLoop is a shell loop whose variable a command may use: for mix in
// "--http 0" "--http 1"; do.
var forLoop = regexp.MustCompile(`\bfor (\w+) in ([^;]*);\s*do\b`)

// documentedCommands returns the probed-bench commands of a Markdown
// text: in its code blocks (a line continued with \ joined to the next,
// a $VAR of an enclosing for loop expanded to each of its values), and in
// its inline code spans that give a command with flags.
func documentedCommands(doc string) []documented {
	var out []documented
	lines := strings.Split(doc, "\n")
	inBlock := false
	loops := map[string][]string{}
	var prose strings.Builder // the text outside code blocks, for the inline spans
	proseLine := []int{}      // the line of BENCHMARKS.md of each line of prose
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			clear(loops)
			continue
		}
		if !inBlock {
			prose.WriteString(line + "\n")
			proseLine = append(proseLine, i+1)
			continue
		}
		start := i + 1
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + lines[i]
		}
		for _, m := range forLoop.FindAllStringSubmatch(line, -1) {
			loops[m[1]] = shellWords(m[2])
		}
		for _, c := range commandsOf(line, loops) {
			out = append(out, documented{line: start, args: c})
		}
	}
	text := prose.String()
	for _, loc := range inlineCode.FindAllStringSubmatchIndex(text, -1) {
		span := strings.ReplaceAll(text[loc[2]:loc[3]], "\n", " ")
		for _, c := range commandsOf(span, nil) {
			if len(c) > 1 { // a command with flags, not a mention
				out = append(out, documented{line: proseLine[strings.Count(text[:loc[0]], "\n")], args: c})
			}
		}
	}
	return out
}

// inlineCode matches a Markdown code span (which may continue on the next
// line).
var inlineCode = regexp.MustCompile("`([^`]+)`")

// commandsOf returns the probed-bench commands of one shell line: the
// known command after a probed-bench binary and its arguments, up to the
// end of that simple command. A $VAR argument of loops is expanded, one
// command per value.
func commandsOf(line string, loops map[string][]string) [][]string {
	words := shellWords(line)
	var out [][]string
	for i := 0; i+1 < len(words); i++ {
		if !benchBinary.MatchString(strings.TrimLeft(words[i], "(")) || !isCommand(words[i+1]) {
			continue
		}
		cmds := [][]string{{words[i+1]}}
		for _, w := range words[i+2:] {
			end := false
			if w == "" {
				continue
			}
			if strings.ContainsAny(w[:1], "|&;#>)") || strings.HasPrefix(w, "2>") {
				break
			}
			if trimmed := strings.TrimRight(w, ");"); trimmed != w {
				w, end = trimmed, true
			}
			if name, values, ok := loopVariable(w, loops); ok {
				var expanded [][]string
				for _, c := range cmds {
					for _, v := range values {
						expanded = append(expanded, append(slices.Clone(c), strings.Fields(strings.ReplaceAll(w, "$"+name, v))...))
					}
				}
				cmds = expanded
			} else {
				for j := range cmds {
					cmds[j] = append(cmds[j], w)
				}
			}
			if end {
				break
			}
		}
		out = append(out, cmds...)
	}
	return out
}

// loopVariable returns the loop variable w refers to ($NAME, whole or in
// part, as in --tick=$t) and the loop's values.
func loopVariable(w string, loops map[string][]string) (name string, values []string, ok bool) {
	for name, values := range loops {
		if strings.Contains(w, "$"+name) {
			return name, values, true
		}
	}
	return "", nil, false
}

// isCommand reports whether name is a probed-bench command.
func isCommand(name string) bool {
	return slices.ContainsFunc(commands, func(c command) bool { return c.name == name })
}

// shellWords splits a line into words as a shell would for these
// commands: at blanks, with "..." and '...' quoting.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// tinySizes are the flags that size each command's run, at their tiny
// values: a documented command runs with these instead of its own (and
// with them when it leaves them at their defaults). Every other flag it
// gives is kept, with its files moved into the test's directory.
var tinySizes = map[string][]string{
	"sched":       {"--probes=100", "--period=10ms", "--duration=300ms", "--warmup=50ms"},
	"sched-child": {"--probes=100", "--period=10ms", "--duration=300ms", "--warmup=50ms"},
	"e2e":         {"--targets=3", "--targets-per-listener=2", "--period=100ms", "--duration=300ms", "--warmup=200ms", "--windows=1"},
	"coldstart":   {"--runs=1", "--start-delay=20ms", "--period=50ms", "--compare=100ms,1s"},
	"scale":       {"--targets=8", "--period=200ms", "--settle=300ms", "--window=300ms"},
	"restart":     {"--targets=6", "--period=200ms", "--rounds=2"},
	"api":         {"--targets=200", "--duration=2s", "--rounds=1"},
	// TTLs far above a renewal's delay on a loaded machine.
	"cluster": {"--lease-ttl=5s", "--lease-ttls=5s", "--kills=1", "--failover-targets=12", "--failover-period=200ms",
		"--flap-targets=6", "--flap-period=200ms", "--registrations=12", "--workers=3", "--watch-targets=3", "--watch-period=50ms",
		"--watch-flip-every=300ms", "--probe-targets=4", "--warmup=100ms", "--duration=400ms"},
}

// boolFlags are the flags of the commands that take no value.
var boolFlags = []string{"json", "metrics", "together"}

// tinyEnv is what the tiny runs run against.
type tinyEnv struct {
	probed string // the probed binary
	dir    string // for the files the commands write
	root   string // of the repository, which --compare paths are relative to
}

// tiny returns the tiny run of d: its name and arguments, and the files
// it must write (--svg, --heap-profile). Flags naming a binary run the
// test's probed; --etcd-bin becomes an etcd the test starts (ETCD in the
// arguments, replaced by run).
func (e tinyEnv) tiny(d documented) (args, files []string, err error) {
	name := d.args[0]
	sizes, ok := tinySizes[name]
	if !ok {
		return nil, nil, fmt.Errorf("%v: no tiny sizes for %q in tinySizes", d, name)
	}
	sized := func(flag string) bool {
		return slices.ContainsFunc(sizes, func(s string) bool { return strings.HasPrefix(s, "--"+flag+"=") })
	}
	args = []string{name}
	for i := 1; i < len(d.args); i++ {
		flag, value, hasValue := strings.Cut(strings.TrimLeft(d.args[i], "-"), "=")
		if !strings.HasPrefix(d.args[i], "-") {
			return nil, nil, fmt.Errorf("%v: %q is not a flag", d, d.args[i])
		}
		if !hasValue && !slices.Contains(boolFlags, flag) {
			if i+1 == len(d.args) {
				return nil, nil, fmt.Errorf("%v: --%s has no value", d, flag)
			}
			i++
			value = d.args[i]
		}
		switch {
		case sized(flag):
			continue
		case flag == "probed-bin":
			bins := strings.Split(value, ",")
			for j := range bins {
				bins[j] = e.probed
			}
			value = strings.Join(bins, ",")
		case flag == "etcd-bin":
			flag, value = "etcd-endpoints", "ETCD"
		case flag == "data-dir":
			value = filepath.Join(e.dir, fmt.Sprintf("data-%d", d.line))
			if err := os.MkdirAll(value, 0o755); err != nil {
				return nil, nil, err
			}
		case flag == "ghz":
			value = "ghz" // from PATH: runTiny skips the command without it
		case flag == "svg" || flag == "heap-profile" || flag == "cpuprofile" || flag == "cpu-profile":
			value = filepath.Join(e.dir, fmt.Sprintf("%d-%s", d.line, filepath.Base(value)))
			files = append(files, value)
		case flag == "compare" && name == "scale":
			value = filepath.Join(e.root, value)
		case strings.Contains(value, "$"):
			return nil, nil, fmt.Errorf("%v: --%s=%s: a shell variable the test cannot expand", d, flag, value)
		}
		if hasValue || !slices.Contains(boolFlags, flag) {
			args = append(args, "--"+flag+"="+value)
		} else {
			args = append(args, "--"+flag)
		}
	}
	return append(args, sizes...), files, nil
}

// TestBenchmarksCommands runs every probed-bench command BENCHMARKS.md
// gives, at a tiny size (tinySizes), against a probed built from this
// repository: each must succeed, print a JSON object last when asked for
// --json, and write the files it is asked for. Commands that differ only
// in their sizes run once. No figure is asserted: this machine's timing is
// not the test's business.
func TestBenchmarksCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs probed")
	}
	doc, err := os.ReadFile(benchmarksFile)
	if err != nil {
		t.Fatal(err)
	}
	cmds := documentedCommands(string(doc))
	bin, err := probedBin()
	if err != nil {
		t.Fatalf("building probed: %v", err)
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	env := tinyEnv{probed: bin, dir: t.TempDir(), root: root}
	seen := map[string]documented{}
	for _, d := range cmds {
		args, files, err := env.tiny(d)
		if err != nil {
			t.Error(err)
			continue
		}
		key := strings.Join(args, " ")
		for _, f := range files {
			key = strings.ReplaceAll(key, f, filepath.Base(filepath.Ext(f)))
		}
		if first, ok := seen[key]; ok {
			t.Logf("%v: runs as line %d does", d, first.line)
			continue
		}
		seen[key] = d
		t.Run(fmt.Sprintf("line %d %s", d.line, d.args[0]), func(t *testing.T) {
			t.Parallel()
			runTiny(t, d, args, files)
		})
	}
}

// runTiny runs one tiny command and checks what it printed and wrote.
func runTiny(t *testing.T, d documented, args, files []string) {
	if args[0] == "api" {
		needGHZ(t)
	}
	if i := slices.Index(args, "--etcd-endpoints=ETCD"); i >= 0 {
		args[i] = "--etcd-endpoints=" + strings.Join(etcdtest.Start(t).Endpoints(), ",")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := runCommand(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("%v\nran as %q: exit %d; stderr:\n%s", d, args, code, stderr.String())
	}
	if slices.Contains(args, "--json") {
		var report any
		if err := json.Unmarshal(lastLine(stdout.Bytes()), &report); err != nil {
			t.Errorf("%v: the last line is not JSON: %v\n%s", d, err, stdout.String())
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".svg") {
			if b, err := os.ReadFile(f); err != nil || !bytes.Contains(b, []byte("<svg")) {
				t.Errorf("%v: %s: %v, not an SVG", d, f, err)
			}
			continue
		}
		if !strings.HasSuffix(f, ".pb.gz") { // a CPU profile
			if st, err := os.Stat(f); err != nil || st.Size() == 0 {
				t.Errorf("%v: no CPU profile %s (%v)", d, f, err)
			}
			continue
		}
		// A heap profile is written per number of targets: NAME-N.pb.gz.
		if m, _ := filepath.Glob(strings.TrimSuffix(f, ".pb.gz") + "-*.pb.gz"); len(m) == 0 {
			t.Errorf("%v: no heap profile %s-N.pb.gz", d, strings.TrimSuffix(f, ".pb.gz"))
		}
	}
}

// runCommand runs a command in this process, as run does, except a hidden
// one (a child's entry point: sched-child), which runs in a child process
// of the test binary (TestMain), as it does for a user: it leaves its
// measuring goroutines to the end of its process.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if !isChildCommand(args[0]) {
		return run(ctx, args, stdout, stderr)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(stderr, err)
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return ee.ExitCode()
		}
		return 1
	}
	return 0
}

// TestDocumentedCommands: the parser finds the commands as a reader of
// BENCHMARKS.md would run them.
func TestDocumentedCommands(t *testing.T) {
	doc := "Run `probed-bench e2e` like this, or `bin/probed-bench sched\n--metrics` inline.\n\n" +
		"```\n" +
		"make build\n" +
		"bin/probed-bench e2e --targets 100,1000 --period 1s \\\n    --svg docs/e.svg --json\n" +
		"for mix in \"--http 1 --keep-alive 1\" \"--http 0\" ; do\n" +
		"  bin/probed-bench scale --targets 1000 $mix --json\n" +
		"done\n" +
		"for i in 1 2; do for d in /tmp/before .; do $d/bin/probed-bench sched --json | tail -1; done; done\n" +
		"(cd bench && go run ./cmd/probed-bench sched --json)\n" +
		"GODEBUG=x=1 /tmp/w26/bench2 restart --probed-bin a,b --json > out.txt\n" +
		"bin/probed-bench sched-child --model=wheel & bin/probed-bench sched-child --model=wheel --metrics & wait\n" +
		"go build -o bin/ ./cmd/probed-bench\n" +
		"```\n"
	var lines []string
	for _, d := range documentedCommands(doc) {
		lines = append(lines, d.String())
	}
	want := []string{
		"line 6: e2e --targets 100,1000 --period 1s --svg docs/e.svg --json",
		"line 9: scale --targets 1000 --http 1 --keep-alive 1 --json",
		"line 9: scale --targets 1000 --http 0 --json",
		"line 11: sched --json",
		"line 12: sched --json",
		"line 13: restart --probed-bin a,b --json",
		"line 14: sched-child --model=wheel",
		"line 14: sched-child --model=wheel --metrics",
		"line 1: sched --metrics",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("documentedCommands =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// TestTinyCoversEveryCommand: every command a user can run has tiny
// sizes, so that a command documented in BENCHMARKS.md can be run by
// TestBenchmarksCommands.
func TestTinyCoversEveryCommand(t *testing.T) {
	for _, c := range commands {
		if _, ok := tinySizes[c.name]; !ok && c.summary != "" {
			t.Errorf("command %q has no tinySizes", c.name)
		}
	}
}

// needGHZ skips the test when ghz, which the api command runs, is not in
// PATH.
func needGHZ(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ghz"); err != nil {
		t.Skip("ghz is not in PATH (go install github.com/bojand/ghz/cmd/ghz@v0.121.0)")
	}
}
