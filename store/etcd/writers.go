package etcd

import (
	"context"
	"strconv"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/keyspace"
)

// MaxCommitsInFlight is the most Commits a Store runs at once
// (CommitsInFlight): each holds a writer key of its own while in flight.
const MaxCommitsInFlight = 16

// writer is one of this store's writer keys: P/writers/<id> (the first)
// or P/writers/<id>/<k> (k ≥ 1). Each Commit in flight holds one and
// compares and puts only it, so concurrent Commits do not refuse each
// other, while a retried transaction still finds out from its key
// whether an earlier attempt was applied (nothing else of this store
// writes that key meanwhile).
type writer struct {
	key string
	// rev is the key's mod revision as this store last saw it (0:
	// absent); owned by the Commit holding the writer.
	rev  int64
	busy bool // guarded by writers.mu
}

// writers hands out the writer keys, the lowest free first, so that a
// replica writes only as many keys as it has Commits in flight at once.
type writers struct {
	keys  keyspace.Keys
	id    string
	base  string        // P/writers/<id>
	slots chan struct{} // one token per Commit in flight
	mu    sync.Mutex
	all   []*writer // by index; guarded by mu
}

func newWriters(keys keyspace.Keys, id string) *writers {
	return &writers{keys: keys, id: id, base: keys.Writer(id, 0), slots: make(chan struct{}, MaxCommitsInFlight)}
}

// key is the writer key of index k.
func (ws *writers) key(k int) string { return ws.keys.Writer(ws.id, k) }

// read records the mod revisions of this replica ID's writer keys in
// etcd (Open).
func (ws *writers) read(ctx context.Context, cli *clientv3.Client) error {
	first, err := cli.Get(ctx, ws.base)
	if err != nil {
		return err
	}
	rest, err := cli.Get(ctx, ws.base+"/", clientv3.WithPrefix())
	if err != nil {
		return err
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, kv := range append(first.Kvs, rest.Kvs...) {
		k := 0
		if suffix, ok := strings.CutPrefix(string(kv.Key), ws.base+"/"); ok {
			if k, err = strconv.Atoi(suffix); err != nil || k < 1 || k >= MaxCommitsInFlight {
				continue // not a key this store writes
			}
		}
		ws.growLocked(k + 1)
		ws.all[k].rev = kv.ModRevision
	}
	return nil
}

// growLocked makes writers up to index n-1; ws.mu held.
func (ws *writers) growLocked(n int) {
	for len(ws.all) < n {
		ws.all = append(ws.all, &writer{key: ws.key(len(ws.all))})
	}
}

// take returns the lowest free writer, waiting while MaxCommitsInFlight
// are taken, or ctx's error.
func (ws *writers) take(ctx context.Context) (*writer, error) {
	select {
	case ws.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range ws.all {
		if !w.busy {
			w.busy = true
			return w, nil
		}
	}
	ws.growLocked(len(ws.all) + 1)
	w := ws.all[len(ws.all)-1]
	w.busy = true
	return w, nil
}

// give returns w, taken by take.
func (ws *writers) give(w *writer) {
	ws.mu.Lock()
	w.busy = false
	ws.mu.Unlock()
	<-ws.slots
}
