// Package keyspace is the layout of probed's keys in etcd, in one place:
// every key under the prefix, the ranges that are read or watched whole,
// the values that two packages share (P/meta and its read-modify-write,
// a member key's value, a shard key's), how a target is assigned a shard,
// and how an event's revision encodes etcd's revision of its transaction.
// store/etcd (the engine's store), cluster (membership and shard
// ownership) and cluster/replica use it; keyspace_test.go pins it.
//
// # Keys
//
// Under the prefix P (default "/probed/"), in lexical order:
//
//	P/events            the changes of the last transaction; etcd's history of
//	                    this key is the event log (store/etcd)
//	P/leader/...        the compaction leader's election (cluster)
//	P/members/<id>      a live replica, on its lease: Member (cluster)
//	P/meta              a JSON object: Meta (store/etcd and cluster)
//	P/shards/<nnnn>     a shard's owner replica ID, on the owner's lease (cluster)
//	P/specs/<name>      a target's spec (store/etcd)
//	P/status/<name>     a target's durable status (store/etcd)
//	P/targetsets/<owner>
//	                    an apply of <owner>'s set, begun and not finished
//	                    (JSON: store/etcd's journal.go)
//	P/targetsets/<owner>@lock
//	                    the replica applying it, on that replica's lease
//	P/targetsets/<owner>@chunks/<gen>/<k>
//	                    the k-th part of that apply's desired list (gen:
//	                    the apply's generation)
//	P/usage/total       the number of stored targets (decimal; store/etcd)
//	P/usage/clients/<client>
//	                    the number of them <client> created (absent: none)
//	P/usage/repaired    the etcd revision of the last Load that corrected
//	                    the counts (store/etcd's usage.go)
//	P/watermarks/<id>   the oldest revision a replica still needs (store/etcd)
//	P/writers/<id>      a replica's last transaction, and P/writers/<id>/<k>
//	                    (store/etcd)
//
// The store's one watch (Followed) is the range from P/events to the end
// of P/shards/: the event log and everything ownership and membership
// are made of, in one stream; not the specs and statuses (P/events
// repeats them), the writer keys (put by the same transactions), the
// applies' journal (a record holds a whole desired list: it would go
// through every replica's watch; its readers read it when they look), the
// counts of targets (changed by every create and removal, read in the
// transactions that compare them) or the watermarks. A new key is in that stream exactly when it sorts inside
// it: keyspace_test.go lists every key on the right side.
package keyspace

import (
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults and bounds.
const (
	// DefaultPrefix is the prefix of every key of a cluster by default.
	DefaultPrefix = "/probed/"
	// DefaultShards is a cluster's number of shards by default.
	DefaultShards = 4096
	// MaxShards bounds the number of shards.
	MaxShards = 1 << 16
)

// Keys is the layout under one prefix, for a cluster of a number of
// shards. The zero value is not usable: make it with New.
type Keys struct {
	prefix string
	shards []string // each shard's key
}

// New returns the layout under prefix (a missing trailing "/" is added;
// "" is DefaultPrefix) for shards shards (at least 1). Shard numbers
// have at least 4 digits, zero-padded, so that their keys sort as the
// numbers do.
func New(prefix string, shards int) Keys {
	prefix = Prefix(prefix)
	shards = max(shards, 1)
	width := max(4, len(strconv.Itoa(shards-1)))
	k := Keys{prefix: prefix, shards: make([]string, shards)}
	for s := range k.shards {
		k.shards[s] = fmt.Sprintf("%sshards/%0*d", prefix, width, s)
	}
	return k
}

// Prefix is prefix as Keys uses it: DefaultPrefix when empty, with a
// trailing "/".
func Prefix(prefix string) string {
	if prefix == "" {
		return DefaultPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix
}

// Prefix is the prefix of every key.
func (k Keys) Prefix() string { return k.prefix }

// ShardCount is the number of shards.
func (k Keys) ShardCount() int { return len(k.shards) }

// Meta is P/meta.
func (k Keys) Meta() string { return k.prefix + "meta" }

// Events is P/events, the event log.
func (k Keys) Events() string { return k.prefix + "events" }

// Specs is the prefix of the specs' keys, P/specs/.
func (k Keys) Specs() string { return k.prefix + "specs/" }

// Spec is the key of a target's spec.
func (k Keys) Spec(name string) string { return k.Specs() + name }

// Statuses is the prefix of the statuses' keys, P/status/.
func (k Keys) Statuses() string { return k.prefix + "status/" }

// Status is the key of a target's status.
func (k Keys) Status(name string) string { return k.Statuses() + name }

// Writer is the writer key of a replica: P/writers/<id> for k 0,
// P/writers/<id>/<k> for the k-th other Commit in flight.
func (k Keys) Writer(id string, n int) string {
	if n == 0 {
		return k.prefix + "writers/" + id
	}
	return k.prefix + "writers/" + id + "/" + strconv.Itoa(n)
}

// TargetSets is the prefix of the applies' journal, P/targetsets/: the
// applies begun and not finished.
func (k Keys) TargetSets() string { return k.prefix + "targetsets/" }

// SetHead is the record of owner's apply. Owner names are target names,
// which never hold "@": a lock or a chunk key is no other owner's record.
func (k Keys) SetHead(owner string) string { return k.TargetSets() + owner }

// SetLock is held, on its lease, by the replica applying owner's set.
func (k Keys) SetLock(owner string) string { return k.SetHead(owner) + "@lock" }

// SetChunks is the prefix of the desired lists of owner's applies, every
// generation.
func (k Keys) SetChunks(owner string) string { return k.SetHead(owner) + "@chunks/" }

// SetChunk is the i-th part of the desired list of generation gen; the
// index is zero-padded so that a generation's chunks sort in order.
func (k Keys) SetChunk(owner, gen string, i int) string {
	return fmt.Sprintf("%s%s/%06d", k.SetChunks(owner), gen, i)
}

// Usage is the prefix of the counts of targets, P/usage/.
func (k Keys) Usage() string { return k.prefix + "usage/" }

// UsageTotal counts every target.
func (k Keys) UsageTotal() string { return k.Usage() + "total" }

// UsageClient counts the targets client created ("" is counted in no key
// of its own: a target created without authentication has no client).
func (k Keys) UsageClient(client string) string { return k.Usage() + "clients/" + client }

// UsageRepaired records the revision of the last correction of the counts.
func (k Keys) UsageRepaired() string { return k.Usage() + "repaired" }

// Watermarks is the prefix of the watermark keys, P/watermarks/.
func (k Keys) Watermarks() string { return k.prefix + "watermarks/" }

// Watermark is a replica's watermark key.
func (k Keys) Watermark(id string) string { return k.Watermarks() + id }

// Members is the prefix of the member keys, P/members/.
func (k Keys) Members() string { return k.prefix + "members/" }

// Member is a replica's member key.
func (k Keys) Member(id string) string { return k.Members() + id }

// Shards is the prefix of the shard keys, P/shards/.
func (k Keys) Shards() string { return k.prefix + "shards/" }

// Shard is shard s's owner key.
func (k Keys) Shard(s int) string { return k.shards[s] }

// Election is the prefix of the compaction leader's election.
func (k Keys) Election() string { return k.prefix + "leader/" }

// Followed is the key range the store's Follow watches, [start, end):
// P/events, P/leader/, P/members/, P/meta and P/shards/.
func (k Keys) Followed() (start, end string) {
	return k.Events(), clientv3.GetPrefixRangeEnd(k.Shards())
}

// Membership is the key range of the member and shard keys, [start, end),
// read whole where ownership and membership are loaded (it also holds
// P/meta, which they ignore).
func (k Keys) Membership() (start, end string) {
	return k.Members(), clientv3.GetPrefixRangeEnd(k.Shards())
}

// ParseMember returns the replica ID of a member key.
func (k Keys) ParseMember(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, k.Members())
	return id, ok && id != ""
}

// ParseShard returns the shard of a shard key.
func (k Keys) ParseShard(key string) (int, bool) {
	n, ok := strings.CutPrefix(key, k.Shards())
	if !ok {
		return 0, false
	}
	s, err := strconv.Atoi(n)
	if err != nil || s < 0 || s >= len(k.shards) || k.shards[s] != key {
		return 0, false
	}
	return s, true
}

// ShardOf is the shard of the named target among shards: fnv-1a (32
// bits) of the name modulo shards.
func ShardOf(name string, shards int) int {
	const (
		offset = 2166136261
		prime  = 16777619
	)
	h := uint32(offset)
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= prime
	}
	return int(h % uint32(shards))
}

// ShardOf is the shard of the named target (ShardOf over k's shards).
func (k Keys) ShardOf(name string) int { return ShardOf(name, len(k.shards)) }

// CheckReplicaID returns what is wrong with a replica ID, or "": it names
// keys (its member key, its writer keys), so it is 1 to 128 bytes without
// '/' or control characters.
func CheckReplicaID(id string) string {
	switch {
	case id == "":
		return "required"
	case len(id) > 128:
		return fmt.Sprintf("%d bytes, more than 128", len(id))
	}
	for _, r := range id {
		if r == '/' || r < 0x20 || r == 0x7f {
			return fmt.Sprintf("%q has a %q", id, r)
		}
	}
	return ""
}
