package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/store/bolt"
	"github.com/probed/probed/store/storetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashEnv) != "" {
		crashChild() // never returns
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if err := bolt.RemoveBenchData(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = max(code, 1)
		}
		os.Exit(code)
	}))
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		dir := t.TempDir()
		return func() engine.Store { return mustOpen(t, dir) }
	})
}

func mustOpen(t testing.TB, dir string, opts ...bolt.Option) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(dir, opts...)
	if err != nil {
		t.Fatalf("Open(%s) = %v", dir, err)
	}
	return s
}

func closeStore(t testing.TB, s *bolt.Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}

// populated returns a data dir holding a closed store with three targets
// and a few hundred events (several pages).
func populated(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	defer closeStore(t, s)
	var changes []*engine.Change
	for _, spec := range storetest.Specs() {
		changes = append(changes, storetest.Create(spec, storetest.Epoch))
	}
	tg := changes[0].Target
	for i := range 300 {
		c := storetest.Transition(tg, probe.Readiness, probe.Result(1+i%2), 1, storetest.Epoch.Add(time.Duration(i)*time.Second))
		changes = append(changes, c)
		tg = c.Target
	}
	if err := s.Commit(t.Context(), changes); err != nil {
		t.Fatalf("Commit() = %v", err)
	}
	return dir
}

func TestOpenCreatesDirAndFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := mustOpen(t, dir)
	defer closeStore(t, s)
	want := filepath.Join(dir, bolt.FileName)
	if s.Path() != want {
		t.Errorf("Path() = %q, want %q", s.Path(), want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != bolt.FileName {
		t.Errorf("data dir holds %v, want only %s (no leftover temporary file)", names, bolt.FileName)
	}
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	first := mustOpen(t, dir)
	second, err := bolt.Open(dir) // the default timeout: fails in about 500ms
	if err == nil {
		closeStore(t, second)
		closeStore(t, first)
		t.Fatal("second Open of a data dir in use = nil error, want ErrLocked")
	}
	if !errors.Is(err, bolt.ErrLocked) {
		t.Errorf("second Open error %v does not wrap ErrLocked", err)
	}
	want := "data dir " + dir + " is in use by another probed process (lock on " + filepath.Join(dir, bolt.FileName) + " held)"
	if err.Error() != want {
		t.Errorf("second Open error:\n got %q\nwant %q", err, want)
	}
	if _, err := bolt.Open(dir, bolt.WithLockTimeout(0)); !errors.Is(err, bolt.ErrLocked) { // one attempt
		t.Errorf("Open(WithLockTimeout(0)) of a dir in use = %v, want ErrLocked", err)
	}
	closeStore(t, first)
	closeStore(t, mustOpen(t, dir)) // free again after Close
}

func TestOpenCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name string
		// damage changes the data file of a populated dir.
		damage func(t *testing.T, path string)
		want   string
	}{
		{
			name:   "Garbage",
			damage: func(t *testing.T, path string) { writeFile(t, path, garbage(64<<10)) },
			want:   "not a bbolt file",
		},
		{
			name: "GarbagePages",
			damage: func(t *testing.T, path string) {
				// Keep the meta pages (the first two), wreck the rest.
				b := readFile(t, path)
				copy(b[2*os.Getpagesize():], garbage(len(b)-2*os.Getpagesize()))
				writeFile(t, path, b)
			},
			want: "consistency check failed",
		},
		{
			name:   "Truncated",
			damage: func(t *testing.T, path string) { truncate(t, path, 5*int64(os.Getpagesize())) },
			want:   "truncated",
		},
		{
			name:   "TruncatedInHeader",
			damage: func(t *testing.T, path string) { truncate(t, path, 100) },
			want:   bolt.FileName,
		},
		{
			name:   "Empty",
			damage: func(t *testing.T, path string) { truncate(t, path, 0) },
			want:   "empty",
		},
		{
			name: "NotProbed",
			damage: func(t *testing.T, path string) {
				rewrite(t, path, func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("meta")) })
			},
			want: "not a probed data file",
		},
		{
			name: "MissingBucket",
			damage: func(t *testing.T, path string) {
				rewrite(t, path, func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("statuses")) })
			},
			want: `no "statuses" bucket`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := populated(t)
			path := filepath.Join(dir, bolt.FileName)
			tc.damage(t, path)
			before := readFile(t, path)
			s, err := bolt.Open(dir)
			if err == nil {
				defer closeStore(t, s)
				_, err = s.Load(t.Context())
			}
			if err == nil {
				t.Fatal("Open and Load of a damaged file = nil error, want one naming the file")
			}
			t.Logf("error: %v", err)
			if !errors.Is(err, bolt.ErrCorrupt) {
				t.Errorf("error %q does not wrap ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want it to name %s and say %q", err, path, tc.want)
			}
			if after := readFile(t, path); string(after) != string(before) {
				t.Errorf("Open changed the damaged file (%d bytes, was %d): it must leave it for the operator", len(after), len(before))
			}
		})
	}
}

// TestLoadCorruptValue: a value that does not decode is an error of Load
// naming the file and the target.
func TestLoadCorruptValue(t *testing.T) {
	dir := populated(t)
	path := filepath.Join(dir, bolt.FileName)
	rewrite(t, path, func(tx *bbolt.Tx) error { return tx.Bucket([]byte("statuses")).Put([]byte("db"), []byte("{not json")) })
	s := mustOpen(t, dir)
	defer closeStore(t, s)
	_, err := s.Load(t.Context())
	if !errors.Is(err, bolt.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `status of target "db"`) {
		t.Errorf("Load() = %v, want ErrCorrupt naming %s and the status of target \"db\"", err, path)
	}
}

// TestLoadDamagedPage: with the check on Open off, a damaged page is found
// by Load, which returns an error (bbolt panics on it) instead of crashing.
func TestLoadDamagedPage(t *testing.T) {
	dir := populated(t)
	path := filepath.Join(dir, bolt.FileName)
	var root uint64
	rewrite(t, path, func(tx *bbolt.Tx) error {
		root = uint64(tx.Bucket([]byte("events")).RootPage())
		return nil
	})
	if root == 0 {
		t.Fatal("the events bucket is inline; want pages")
	}
	b := readFile(t, path)
	page := os.Getpagesize()
	copy(b[int(root)*page:], garbage(page))
	writeFile(t, path, b)

	s := mustOpen(t, dir, bolt.WithCheck(false))
	defer closeStore(t, s)
	_, err := s.Load(t.Context())
	t.Logf("error: %v", err)
	if !errors.Is(err, bolt.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("Load() = %v, want ErrCorrupt naming %s", err, path)
	}
}

// TestLoadNewerValue: a value with a field this build does not know (a
// newer probed added it) is ErrSchemaVersion naming the value, not data
// silently dropped.
func TestLoadNewerValue(t *testing.T) {
	dir := populated(t)
	path := filepath.Join(dir, bolt.FileName)
	rewrite(t, path, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("statuses"))
		v := protowire.AppendVarint(protowire.AppendTag(bytes.Clone(b.Get([]byte("db"))), 99, protowire.VarintType), 1)
		return b.Put([]byte("db"), v)
	})
	s := mustOpen(t, dir)
	defer closeStore(t, s)
	_, err := s.Load(t.Context())
	t.Logf("error: %v", err)
	if !errors.Is(err, bolt.ErrSchemaVersion) || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), `status of target "db"`) || !strings.Contains(err.Error(), "unknown field 99") {
		t.Errorf("Load() = %v, want ErrSchemaVersion naming %s, the status of target \"db\" and field 99", err, path)
	}
}

func TestOpenFutureSchema(t *testing.T) {
	dir := populated(t)
	path := filepath.Join(dir, bolt.FileName)
	rewrite(t, path, func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte{0, 0, 0, 0, 0, 0, 0, 99})
	})
	s, err := bolt.Open(dir)
	if err == nil {
		closeStore(t, s)
		t.Fatal("Open of a file with schema version 99 = nil error, want ErrSchemaVersion")
	}
	t.Logf("error: %v", err)
	if !errors.Is(err, bolt.ErrSchemaVersion) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "schema version 99") {
		t.Errorf("Open() = %v, want ErrSchemaVersion naming %s and version 99", err, path)
	}
}

func TestCompactInBatches(t *testing.T) {
	dir := populated(t) // revisions 1..303
	s := mustOpen(t, dir, bolt.WithCompactBatch(7))
	defer closeStore(t, s)
	if err := s.Compact(t.Context(), 300); err != nil {
		t.Fatalf("Compact(300) = %v", err)
	}
	st, err := s.Load(t.Context())
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	if len(st.Events) != 4 || st.Events[0].Revision != 300 || st.Revision != 303 {
		t.Errorf("after Compact(300): %d events from %d, revision %d; want 4 from 300, revision 303", len(st.Events), st.Events[0].Revision, st.Revision)
	}
}

func TestCompactStopsOnCancel(t *testing.T) {
	dir := populated(t)
	s := mustOpen(t, dir, bolt.WithCompactBatch(1))
	defer closeStore(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Compact(ctx, 300); !errors.Is(err, context.Canceled) {
		t.Errorf("Compact(cancelled) = %v, want context.Canceled", err)
	}
}

func TestClosedErrors(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	closeStore(t, s)
	if _, err := s.Load(t.Context()); !errors.Is(err, bolt.ErrClosed) {
		t.Errorf("Load() after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
}

func garbage(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// rewrite changes a closed data file with bbolt directly.
func rewrite(t *testing.T, path string, fn func(*bbolt.Tx) error) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
