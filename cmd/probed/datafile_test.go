package main

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/store/bolt"
)

// TestServeRefusesADamagedDataFile: serve over a data dir whose probed.db
// is damaged (or not probed's) fails with an error naming the file and
// wrapping bolt.ErrCorrupt; it never starts (empty or otherwise), and
// leaves the file as it was for the operator to inspect or restore.
func TestServeRefusesADamagedDataFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file func(t *testing.T) []byte
		want string
	}{
		{
			name: "garbage",
			file: func(*testing.T) []byte {
				b := make([]byte, 64<<10)
				for i := range b {
					b[i] = byte(rand.IntN(256))
				}
				return b
			},
			want: "not a bbolt file",
		},
		{
			name: "empty",
			file: func(*testing.T) []byte { return nil },
			want: "the file is empty",
		},
		{
			name: "truncated",
			file: func(t *testing.T) []byte {
				b := usedDataFile(t)
				return b[:len(b)/2]
			},
			want: "truncated",
		},
		{
			name: "another program's bbolt file",
			file: foreignBoltFile,
			want: "not a probed data file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			path := filepath.Join(cfg.dataDir, bolt.FileName)
			content := tt.file(t)
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			served := false
			err := serve(ctx, cfg, func(net.Addr) { served = true })
			switch {
			case served:
				t.Fatalf("serve started over a %s data file", tt.name)
			case !errors.Is(err, bolt.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want):
				t.Fatalf("serve = %v; want an error wrapping ErrCorrupt that names %s and says %q", err, path, tt.want)
			}
			assertUntouched(t, cfg.dataDir, content)
		})
	}
}

// TestProbedExitsOnAGarbageDataFile runs the real binary over a garbage
// data file: it exits with status 1 and a message naming the file, and
// listens on nothing.
func TestProbedExitsOnAGarbageDataFile(t *testing.T) {
	t.Parallel()
	bin := buildProbed(t)
	dir := t.TempDir()
	garbage := bytes.Repeat([]byte("not a database "), 4096)
	path := filepath.Join(dir, bolt.FileName)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := refused.Reserve(t).Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := crashChildArgs(t, addr, dir)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("probed over a garbage data file: %v, want exit status 1; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), path) || !strings.Contains(string(out), bolt.ErrCorrupt.Error()) {
		t.Errorf("probed's output does not name the corrupt file %s:\n%s", path, out)
	}
	if strings.Contains(string(out), "probed serving") {
		t.Errorf("probed served over a garbage data file:\n%s", out)
	}
	assertUntouched(t, dir, garbage)
}

// assertUntouched checks that dir holds exactly the data file, with
// content: nothing was recreated, initialised or left behind.
func assertUntouched(t *testing.T, dir string, content []byte) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, bolt.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Errorf("the data file changed: %d bytes, was %d", len(got), len(content))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("data dir holds %v, want only %s", names, bolt.FileName)
	}
}

// usedDataFile returns the data file of a server that registered a
// target and stopped.
func usedDataFile(t *testing.T) []byte {
	t.Helper()
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, func(a net.Addr) { addr <- a }) }()
	var a net.Addr
	select {
	case a = <-addr:
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	}
	c, err := client.Dial(ctx, a.String())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, &probev1.Target{Name: "web", Labels: map[string]string{"app": "demo"}}); err != nil {
		t.Errorf("Create: %v", err)
	}
	_ = c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(cfg.dataDir, bolt.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// foreignBoltFile returns a valid bbolt file that is not probed's.
func foreignBoltFile(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("widgets"))
		if err != nil {
			return err
		}
		return b.Put([]byte("a"), []byte("b"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
