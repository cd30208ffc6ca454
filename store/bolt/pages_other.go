//go:build !linux

package bolt

import bbolt "go.etcd.io/bbolt"

// dropPages does nothing here: see pages_linux.go.
func dropPages(*bbolt.DB, int64) {}
