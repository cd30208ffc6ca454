package etcdtest

import "go.uber.org/goleak"

// LeakOptions are the goleak options of a package whose tests run etcd
// in the test process: etcd's peer handler answers a version request
// from a read transaction of the backend, and a request that arrived as
// the server closed stays blocked on the closed backend's lock (etcd's
// goroutine, not the package's). Everything else still counts as a leak.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp.newPeerHandler.versionHandler.func1"),
	}
}
