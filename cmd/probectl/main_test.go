package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestMain(m *testing.M) {
	// No configuration file of the machine's user (context.go) applies.
	dir, err := os.MkdirTemp("", "probectl-config")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	os.Unsetenv("PROBECTL_CONFIG")
	os.Unsetenv("PROBED_ADDR")
	defer os.RemoveAll(dir)
	goleak.VerifyTestMain(m)
}

// result is what one probectl run printed and returned.
type result struct {
	out, err string
	code     int
}

// probectl runs the command in-process against addr.
func probectl(ctx context.Context, addr, stdin string, args ...string) result {
	var out, errOut bytes.Buffer
	code := run(ctx, append([]string{"--addr", addr}, args...), strings.NewReader(stdin), &out, &errOut)
	return result{out: out.String(), err: errOut.String(), code: code}
}

// server starts a probed and returns it with a client for setting up.
func server(t *testing.T) (*probedtest.Server, *client.Client) {
	t.Helper()
	s := probedtest.Start(t, probedtest.Options{})
	return s, client.New(s.Conn)
}

func mustCreate(t *testing.T, c *client.Client, tg *probev1.Target) *probev1.Target {
	t.Helper()
	got, err := c.Create(t.Context(), tg)
	if err != nil {
		t.Fatalf("Create %s: %v", tg.GetName(), err)
	}
	return got
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tableRows splits a printed table into rows of fields, header first.
func tableRows(s string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown output", []string{"-o", "xml", "list"}, `Error: unknown output format "xml": want table, wide (list and get), json or yaml` + "\n" +
			"Run 'probectl list --help' for usage.\n"},
		{"wide is for list and get", []string{"-o", "wide", "watch"}, "Error: -o wide is for list and get; watch prints table, json or yaml\n" +
			"Run 'probectl watch --help' for usage.\n"},
		{"get needs a name", []string{"get"}, "Error: accepts 1 arg(s), received 0\nRun 'probectl get --help' for usage.\n"},
		{"bad probe", []string{"trigger", "x", "--probe", "sideways"}, `Error: unknown probe "sideways": want startup, liveness or readiness` + "\n"},
		{"bad selector", []string{"list", "-l", "app"}, `Error: bad label selector "app": want KEY=VALUE pairs separated by commas` + "\n"},
		{"bad kind", []string{"watch", "--kinds", "exploded"}, `Error: unknown event kind "exploded": want snapshot, transition, initialized, created, updated, reset, terminating or deleted` + "\n"},
		{"apply needs a file", []string{"apply"}, `Error: apply needs -f FILE: a file, a directory, or "-" for standard input` + "\n" +
			"Run 'probectl apply --help' for usage.\n"},
		{"apply without -f", []string{"apply", "a.yaml", "b.yaml"}, `Error: apply reads files given with -f: did you mean "probectl apply -f a.yaml -f b.yaml"?` + "\n" +
			"Run 'probectl apply --help' for usage.\n"},
		// A bad flag value: the message and one line pointing to the help,
		// not the whole usage.
		{"bad flag value", []string{"wait-ready", "x", "--timeout", "soon"}, `Error: invalid argument "soon" for "--timeout" flag: time: invalid duration "soon"` + "\n" +
			"Run 'probectl wait-ready --help' for usage.\n"},
		{"unknown flag", []string{"list", "--colour"}, "Error: unknown flag: --colour\nRun 'probectl list --help' for usage.\n"},
		{"unknown command", []string{"lsit"}, "Error: unknown command \"lsit\" for \"probectl\"\n\nDid you mean this?\n\tlist\n\nRun 'probectl --help' for usage.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := probectl(t.Context(), "127.0.0.1:1", "", tt.args...)
			if r.code != 1 || r.err != tt.wantErr || r.out != "" {
				t.Errorf("got code %d, stdout %q, stderr %q; want 1, nothing, %q", r.code, r.out, r.err, tt.wantErr)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(refused.Port(t)))) // nothing listens there
	r := probectl(t.Context(), addr, "", "get", "x")
	if r.code != 1 || !strings.HasPrefix(r.err, "Error: cannot reach probed: ") {
		t.Errorf("got code %d, stderr %q; want 1 and a cannot-reach message", r.code, r.err)
	}
}

func TestAddrFromEnvironment(t *testing.T) {
	s, _ := server(t)
	t.Setenv("PROBED_ADDR", s.Addr)
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"list"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("list with PROBED_ADDR: code %d, stderr %q", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "NAME") {
		t.Errorf("stdout = %q, want a table", out.String())
	}
}

func unmarshalJSON(s string, m proto.Message) error {
	return protojson.Unmarshal([]byte(s), m)
}
