package fullfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/probed/probed/internal/fullfs"
)

// TestFillAndFree: after Fill a write fails with ENOSPC; after Free it
// succeeds.
func TestFillAndFree(t *testing.T) {
	fs := fullfs.Mount(t, 1<<20)
	path := filepath.Join(fs.Dir, "probe")
	fs.Fill(t)
	if err := os.WriteFile(path, make([]byte, 64<<10), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write after Fill = %v, want ENOSPC", err)
	}
	fs.Free(t)
	if err := os.WriteFile(path, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatalf("write after Free = %v", err)
	}
}
