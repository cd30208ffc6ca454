package bolt

import (
	"errors"
	"fmt"

	"github.com/probed/probed/store/codec"
)

// Sentinel errors. Errors returned by the store wrap one of these (check
// with errors.Is) and name the data file.
var (
	// ErrLocked: another process (or another Store in this one) has the
	// data dir open.
	ErrLocked = errors.New("data dir in use by another process")
	// ErrCorrupt: the data file is damaged (garbage, truncated, broken
	// pages) or is not a probed data file. The store never reads such a
	// file as empty and never recreates it.
	ErrCorrupt = errors.New("corrupt data file")
	// ErrSchemaVersion: the data file was written with a schema this
	// build does not know (by a newer probed).
	ErrSchemaVersion = errors.New("unsupported schema version")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store closed")
)

// lockedError says which dir is locked, in the words an operator who
// started a second server needs.
type lockedError struct {
	dir, path string
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("data dir %s is in use by another probed process (lock on %s held)", e.dir, e.path)
}

// Is reports ErrLocked.
func (e *lockedError) Is(target error) bool { return target == ErrLocked }

// corrupt returns an error wrapping ErrCorrupt (and cause, when not nil)
// that names the file and what is wrong with it.
func corrupt(path string, cause error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if cause != nil {
		return fmt.Errorf("%s: %w: %s: %w", path, ErrCorrupt, what, cause)
	}
	return fmt.Errorf("%s: %w: %s", path, ErrCorrupt, what)
}

// undecodable returns the error for a stored value that does not decode
// (cause, from store/codec): ErrSchemaVersion when a newer probed wrote it
// (a field or value this build does not know), else ErrCorrupt. Both name
// the file and the value.
func undecodable(path string, cause error, format string, args ...any) error {
	if errors.Is(cause, codec.ErrNewerFormat) {
		return fmt.Errorf("%s: %w: %s: %w; run the probed that wrote it (or newer) on this data dir",
			path, ErrSchemaVersion, fmt.Sprintf(format, args...), cause)
	}
	return corrupt(path, cause, format, args...)
}
