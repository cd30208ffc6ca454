// Package fullfs gives tests a small real filesystem (a tmpfs) that they
// can fill up and free again, to see what a full disk does to probed.
package fullfs

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// FS is a mounted tmpfs.
type FS struct {
	// Dir is where it is mounted.
	Dir    string
	filler string
}

// Mount mounts a tmpfs of size bytes on a new directory, unmounted when
// the test ends (after the cleanups registered later, so servers using
// it stop first). It skips the test, saying why, where mounting is not
// permitted (not root, no CAP_SYS_ADMIN, a restricted container).
func Mount(t testing.TB, size int) *FS {
	t.Helper()
	dir := t.TempDir()
	opts := "size=" + strconv.Itoa(size) + ",mode=0700"
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		t.Skipf("SKIPPED: cannot mount a tmpfs to fill up (%v): run as root (or with CAP_SYS_ADMIN) to test a full disk", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return &FS{Dir: dir, filler: filepath.Join(dir, "filler")}
}

// Fill writes a file until the filesystem has no space left.
func (f *FS) Fill(t testing.TB) {
	t.Helper()
	file, err := os.OpenFile(f.filler, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = file.Close() }()
	chunk := make([]byte, 4096)
	for {
		if _, err := file.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatalf("filling %s: %v", f.Dir, err)
		}
	}
}

// Free removes what Fill wrote.
func (f *FS) Free(t testing.TB) {
	t.Helper()
	if err := os.Remove(f.filler); err != nil {
		t.Fatal(err)
	}
}
