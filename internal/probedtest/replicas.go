package probedtest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/probed/probed/server"
	"github.com/probed/probed/store/memory"
)

// Replicas are probed servers sharing one store, as the replicas of a
// cluster share etcd (memory.Shared stands in for it): each owns the
// targets of its shard — replica i owns the names with the digit i after
// "r" (like "r1-web"), replica 0 the others — until Move gives a shard to
// another, forwards the calls that change the others' targets, and serves
// every target to readers.
type Replicas struct {
	Servers []*Server
	shared  *memory.Shared
	n       int

	mu     sync.Mutex
	owners []int    // shard → the replica that owns it; guarded by mu
	since  []uint64 // shard → the position its owner took it at; guarded by mu
}

// StartReplicas starts n replicas (1 ≤ n ≤ 10) over one shared store.
// Options apply to each (Store, Server.Forwarder and Server.Replicas are
// set).
func StartReplicas(t testing.TB, n int, opts Options) *Replicas {
	t.Helper()
	rs := &Replicas{n: n, owners: make([]int, n), since: make([]uint64, n)}
	rs.shared = memory.NewShared(1, n, rs.shardOf)
	for i := range n {
		rs.owners[i], rs.since[i] = i, rs.shared.Assign(replicaID(i), i)
	}
	for i := range n {
		o := opts
		o.Store = rs.shared.Replica(replicaID(i))
		o.Server.Forwarder = forwarder{rs: rs, self: i}
		o.Server.Replicas = members{rs}
		o.Server.ReplicaID = replicaID(i)
		rs.Servers = append(rs.Servers, Start(t, o))
	}
	return rs
}

func replicaID(i int) string { return "r" + string(rune('0'+i)) }

// shardOf is name's shard: the digit after "r", or 0.
func (rs *Replicas) shardOf(name string) int {
	if strings.HasPrefix(name, "r") && len(name) > 1 && name[1] >= '0' && name[1] <= '9' {
		if i := int(name[1] - '0'); i < rs.n {
			return i
		}
	}
	return 0
}

// owner is the replica that owns name's shard, and the position it took
// it at.
func (rs *Replicas) owner(name string) (int, uint64) {
	sh := rs.shardOf(name)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.owners[sh], rs.since[sh]
}

// Move gives shard to replica to, as a cluster's claim does: the
// replicas' forwarding sees it at once, each engine when its Follow
// reaches the position Move returns.
func (rs *Replicas) Move(shard, to int) uint64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	pos := rs.shared.Assign(replicaID(to), shard)
	rs.owners[shard], rs.since[shard] = to, pos
	return pos
}

// Addrs is the comma-separated list of the replicas' addresses.
func (rs *Replicas) Addrs() string {
	addrs := make([]string, len(rs.Servers))
	for i, s := range rs.Servers {
		addrs[i] = s.Addr
	}
	return strings.Join(addrs, ",")
}

// forwarder reaches the owner of a target among the replicas.
type forwarder struct {
	rs   *Replicas
	self int
}

func (f forwarder) Owner(_ context.Context, name string) (grpc.ClientConnInterface, string, error) {
	i, since := f.rs.owner(name)
	if i == f.self {
		return nil, "", &server.OwnedHereError{Position: since}
	}
	return f.rs.Servers[i].Conn, replicaID(i), nil
}

var _ server.Forwarder = forwarder{}

// members describes the replicas to the servers: one "shard" per replica,
// each target owned as Owner says.
type members struct{ rs *Replicas }

func (m members) OwnerOf(name string) string {
	i, _ := m.rs.owner(name)
	return replicaID(i)
}

func (m members) Members() []server.Replica {
	out := make([]server.Replica, len(m.rs.Servers))
	for i, s := range m.rs.Servers {
		out[i] = server.Replica{ID: replicaID(i), Addr: s.Addr, Shards: 1}
	}
	return out
}

func (m members) Shards() int { return len(m.rs.Servers) }
