package bolt

import (
	bbolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// dropPages takes the data file's pages out of this process's resident
// memory (madvise MADV_DONTNEED over bbolt's read-only, shared mapping of
// the file's size bytes): they stay in the page cache, and a later read
// maps them again from there. Load reads every page of the file once,
// which would otherwise leave the whole file counted in probed's RSS
// after a restart (~150 B per target), where a probed that registered
// the same targets has only the pages its writes read. The caller holds
// a read transaction, so that bbolt cannot remap the file meanwhile.
// Errors are ignored: the pages only stay resident.
func dropPages(db *bbolt.DB, size int64) {
	if size <= 0 {
		return
	}
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, db.Info().Data, uintptr(size), unix.MADV_DONTNEED)
}
