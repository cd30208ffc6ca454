package bolt_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/fullfs"
	"github.com/probed/probed/store/storetest"
)

// TestCommitOnAFullDisk: on a full filesystem (a real tmpfs) Commit fails
// with an error wrapping engine.ErrUnavailable that names the data dir and
// says "no space", and writes nothing; once space is freed the same kind
// of Commit succeeds, and everything committed before, between and after
// is there after a reopen.
func TestCommitOnAFullDisk(t *testing.T) {
	fs := fullfs.Mount(t, 2<<20)
	dir := filepath.Join(fs.Dir, "data")
	s := mustOpen(t, dir)
	defer func() { closeStore(t, s) }()

	committed := map[string]bool{}
	create := func(i int) error {
		spec := storetest.WebSpec(fmt.Sprintf("t-%04d", i))
		spec.Labels = map[string]string{"padding": strings.Repeat("x", 1000)}
		err := s.Commit(t.Context(), []*engine.Change{storetest.Create(spec, storetest.Epoch.Add(time.Duration(i)*time.Second))})
		if err == nil {
			committed[spec.Name] = true
		}
		return err
	}
	for i := range 20 {
		if err := create(i); err != nil {
			t.Fatalf("Commit #%d before the disk is full: %v", i, err)
		}
	}
	fs.Fill(t)
	var full error
	i := 20
	for ; i < 5000 && full == nil; i++ {
		full = create(i)
	}
	if full == nil {
		t.Fatalf("%d Commits succeeded on a full disk", i-20)
	}
	t.Logf("Commit on a full disk: %v", full)
	if !errors.Is(full, engine.ErrUnavailable) {
		t.Fatalf("Commit on a full disk = %v, want an error wrapping engine.ErrUnavailable", full)
	}
	for _, want := range []string{"data dir " + dir, "no space"} {
		if !strings.Contains(full.Error(), want) {
			t.Errorf("Commit on a full disk = %q, want it to say %q", full, want)
		}
	}
	if err := create(i); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("Commit again on the full disk = %v, want ErrUnavailable", err)
	}
	fs.Free(t)
	for j := i + 1; j < i+20; j++ {
		if err := create(j); err != nil {
			t.Fatalf("Commit after space was freed: %v", err)
		}
	}
	closeStore(t, s)
	s = mustOpen(t, dir)
	st, err := s.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, tg := range st.Targets {
		got[tg.Spec.Name] = true
	}
	for name := range committed {
		if !got[name] {
			t.Errorf("target %s committed but not loaded after a reopen", name)
		}
	}
	if len(got) != len(committed) {
		t.Errorf("loaded %d targets, committed %d: a failed Commit wrote something", len(got), len(committed))
	}
}
