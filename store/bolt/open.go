package bolt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// FileName is the name of the data file in the data dir.
const FileName = "probed.db"

// Open opens the store in dir, creating dir and an empty data file
// <dir>/FileName if there is none. The caller must Close the store.
//
// The data file is locked (flock) for as long as the store is open. When
// another process holds the lock, Open waits up to the lock timeout
// (WithLockTimeout) and fails with an error wrapping ErrLocked that names
// the dir and the file.
//
// An existing file is checked before it is used: a file that is empty,
// truncated, garbage, damaged (see WithCheck) or not a probed data file
// is an error wrapping ErrCorrupt that names the file and the problem; one
// with an unknown (newer) schema version is ErrSchemaVersion. A file of an
// older schema is upgraded in place, in one transaction, before Open
// returns (logged with WithLogger). Open never
// starts empty over a file it cannot read, and never recreates one: a new
// file is built under a temporary name and linked into place only once
// complete, so any probed.db that exists was complete once.
func Open(dir string, opts ...Option) (*Store, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	if err := create(dir, path, o); err != nil {
		return nil, err
	}
	if err := verify(dir, path, o); err != nil {
		return nil, err
	}
	db, err := bbolt.Open(path, 0o600, o.bolt(false))
	if err != nil {
		return nil, openError(dir, path, err)
	}
	if err := upgrade(db, path, o.logger); err != nil {
		_ = db.Close() // the upgrade failed as a whole: nothing written
		return nil, err
	}
	return &Store{db: db, path: path, compactBatch: o.compactBatch}, nil
}

// bolt returns the bbolt options.
//
// NoSync stays false: every commit is fsync'd (fdatasync) before it
// returns. The freelist is synced (NoFreelistSync false, unlike etcd):
// the freelist of a file of probed's size is a page or two, written in
// the same fsync as the commit, and with it Open reads that page instead
// of rebuilding the freelist by walking every page in a goroutine of
// bbolt's own, where a damaged page panics beyond any recover and kills
// the process. The freelist is a hash map (FreelistMapType), bbolt's
// faster kind.
func (o *options) bolt(readOnly bool) *bbolt.Options {
	timeout := o.lockTimeout
	if timeout <= 0 {
		timeout = time.Nanosecond // one attempt; bbolt's 0 would wait forever
	}
	return &bbolt.Options{
		Timeout:        timeout,
		ReadOnly:       readOnly,
		NoSync:         false,
		NoFreelistSync: false,
		FreelistType:   bbolt.FreelistMapType,
		OpenFile:       openExisting,
	}
}

// errEmptyFile: the data file exists with no bytes (bbolt would silently
// initialise it).
var errEmptyFile = errors.New("empty file")

// openExisting is bbolt's OpenFile: it never creates the file (bbolt asks
// for O_CREATE) and refuses an empty one, so that nothing but create
// makes a data file.
func openExisting(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag&^os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() == 0 {
		err = errEmptyFile
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// create makes an empty data file at path unless one exists: it builds it
// under a temporary name, then links it into place, so that a crash
// leaves either no file or a complete one (at worst a stray
// probed.db.new-* file), and two processes racing to create it end up
// with the same file.
func create(dir, path string, o options) (err error) {
	switch _, err := os.Lstat(path); {
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("data file %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, FileName+".new-*")
	if err != nil {
		return fmt.Errorf("create data file in %s: %w", dir, err)
	}
	tmpPath := tmp.Name()
	defer func() {
		if rmErr := os.Remove(tmpPath); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
			err = rmErr
		}
	}()
	if err := tmp.Close(); err != nil {
		return err
	}
	bo := o.bolt(false)
	bo.OpenFile = nil // the empty temporary file is bbolt's to initialise
	db, err := bbolt.Open(tmpPath, 0o600, bo)
	if err != nil {
		return fmt.Errorf("create data file %s: %w", tmpPath, err)
	}
	if err := db.Update(initLayout); err != nil {
		_ = db.Close()
		return fmt.Errorf("create data file %s: %w", tmpPath, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("create data file %s: %w", tmpPath, err)
	}
	// Link fails if path exists: whoever linked first wins and everyone
	// opens that file.
	if err := os.Link(tmpPath, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create data file %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir makes a new directory entry durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync data dir %s: %w", dir, err)
	}
	return nil
}

// verify checks the data file read-only, before the read-write open:
// valid meta pages (bbolt), no page beyond the end of the file (reading
// one would fault), the full page check unless disabled (bbolt runs it in
// a goroutine that turns panics on damaged pages into errors), the
// buckets and the schema version.
func verify(dir, path string, o options) error {
	db, err := bbolt.Open(path, 0o600, o.bolt(true))
	if err != nil {
		return openError(dir, path, err)
	}
	defer func() { _ = db.Close() }() // read-only check; nothing to lose
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return db.View(func(tx *bbolt.Tx) error {
		if need := tx.Size(); need > fi.Size() {
			return corrupt(path, nil, "truncated: the file has %d bytes but its pages extend to %d", fi.Size(), need)
		}
		if o.check {
			if err := check(tx); err != nil {
				return corrupt(path, err, "consistency check failed")
			}
		}
		_, err := checkLayout(tx, path)
		return err
	})
}

// check runs bbolt's consistency check and returns the first few problems.
func check(tx *bbolt.Tx) error {
	const keep = 3
	var errs []error
	n := 0
	for err := range tx.Check() { // drain: the check stops only at the end
		if n++; n <= keep {
			errs = append(errs, err)
		}
	}
	if n > keep {
		errs = append(errs, fmt.Errorf("and %d more problems", n-keep))
	}
	return errors.Join(errs...)
}

// openError turns an error of bbolt.Open into one an operator can act on.
func openError(dir, path string, err error) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return &lockedError{dir: dir, path: path}
	case errors.Is(err, errEmptyFile):
		return corrupt(path, nil, "the file is empty (truncated to 0 bytes)")
	case errors.Is(err, berrors.ErrInvalid):
		size := "unknown"
		if fi, statErr := os.Stat(path); statErr == nil {
			size = strconv.FormatInt(fi.Size(), 10)
		}
		return corrupt(path, err, "not a bbolt file, or both of its meta pages are damaged (the file has %s bytes)", size)
	case errors.Is(err, berrors.ErrChecksum):
		return corrupt(path, err, "meta page checksum mismatch")
	case errors.Is(err, berrors.ErrVersionMismatch):
		return corrupt(path, err, "unknown bbolt file format version")
	case strings.Contains(err.Error(), "file size too small"):
		return corrupt(path, err, "truncated: smaller than its two meta pages")
	default:
		return fmt.Errorf("open %s: %w", path, err)
	}
}
