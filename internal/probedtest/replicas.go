package probedtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/probed/probed/server"
	"github.com/probed/probed/store/memory"
)

// Replicas are probed servers sharing one store, as the replicas of a
// cluster share etcd (memory.Shared stands in for it): each owns the
// targets Owner gives it, forwards the calls that change the others'
// targets, and serves every target to readers.
type Replicas struct {
	Servers []*Server
	// Owner is the index of the replica that owns a target: by default the
	// digit after "r" in a name like "r1-web", else 0.
	Owner func(name string) int

	mu     sync.Mutex
	moved  map[string]int // guarded by mu
	shared *memory.Shared
}

// StartReplicas starts n replicas (1 ≤ n ≤ 10) over one shared store.
// Options apply to each (Store, Engine.Owns, Server.Forwarder and
// Server.Replicas are set).
func StartReplicas(t testing.TB, n int, opts Options) *Replicas {
	t.Helper()
	rs := &Replicas{shared: memory.NewShared(1), moved: make(map[string]int)}
	rs.Owner = rs.defaultOwner
	for i := range n {
		o := opts
		o.Store = rs.shared.Replica(func(name string) bool { return rs.owner(name) == i })
		o.Engine.Owns = func(name string) bool { return rs.owner(name) == i }
		o.Server.Forwarder = forwarder{rs: rs, self: i}
		o.Server.Replicas = members{rs}
		o.Server.ReplicaID = replicaID(i)
		rs.Servers = append(rs.Servers, Start(t, o))
	}
	return rs
}

func replicaID(i int) string { return "r" + string(rune('0'+i)) }

func (rs *Replicas) defaultOwner(name string) int {
	if strings.HasPrefix(name, "r") && len(name) > 1 && name[1] >= '0' && name[1] <= '9' {
		if i := int(name[1] - '0'); i < len(rs.Servers) {
			return i
		}
	}
	return 0
}

// owner is the replica that owns name now.
func (rs *Replicas) owner(name string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if i, ok := rs.moved[name]; ok {
		return i
	}
	return rs.Owner(name)
}

// Move hands a target from its owner to replica to, as a shard moves:
// the owner disowns it, then to owns it from what is published.
func (rs *Replicas) Move(ctx context.Context, name string, to int) error {
	from := rs.owner(name)
	if err := rs.Servers[from].Engine.Disown(ctx, name); err != nil {
		return err
	}
	rs.mu.Lock()
	rs.moved[name] = to
	rs.mu.Unlock()
	if err := rs.Servers[to].Engine.Sync(ctx, rs.Servers[from].Engine.Revision()); err != nil {
		return err
	}
	return rs.Servers[to].Engine.Own(ctx, name)
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
	i := f.rs.owner(name)
	if i == f.self {
		return nil, "", errors.New("this replica is taking it over")
	}
	return f.rs.Servers[i].Conn, replicaID(i), nil
}

var _ server.Forwarder = forwarder{}

// members describes the replicas to the servers: one "shard" per replica,
// each target owned as Owner says.
type members struct{ rs *Replicas }

func (m members) OwnerOf(name string) string { return replicaID(m.rs.owner(name)) }

func (m members) Members() []server.Replica {
	out := make([]server.Replica, len(m.rs.Servers))
	for i, s := range m.rs.Servers {
		out[i] = server.Replica{ID: replicaID(i), Addr: s.Addr, Shards: 1}
	}
	return out
}

func (m members) Shards() int { return len(m.rs.Servers) }
