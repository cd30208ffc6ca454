package bolt

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/probed/probed/engine"
)

// noSpace reports whether err says the data file's filesystem is out of
// space (ENOSPC) or its quota is used up (EDQUOT): failures that pass once
// space is freed, so the engine holds its changes and retries
// (engine.ErrUnavailable) rather than stopping. bbolt formats the errors of
// growing the file with %s, losing the errno, so its text is matched too.
//
// Other I/O errors stay fatal: after a failed fsync (EIO) the kernel may
// have dropped the dirty pages, and a retry could report as durable what
// never reached the disk.
func noSpace(err error) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}

// noSpaceError is the error of op failing with err for want of space on
// the data dir's filesystem: it wraps engine.ErrUnavailable and err, and
// starts with the cause, naming the dir and the file: "no space left on
// the device of the data dir /var/lib/probed (writing probed.db, commit)",
// or "the disk quota of the data dir ... is used up (...)".
func noSpaceError(path, op string, err error) error {
	cause := "no space left on the device of the data dir %s (writing %s, %s): %w: %w"
	if errors.Is(err, syscall.EDQUOT) || strings.Contains(err.Error(), syscall.EDQUOT.Error()) {
		cause = "the disk quota of the data dir %s is used up (writing %s, %s): %w: %w"
	}
	return fmt.Errorf(cause, filepath.Dir(path), filepath.Base(path), op, engine.ErrUnavailable, err)
}
