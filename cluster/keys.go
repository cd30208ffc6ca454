package cluster

import (
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// keys is the layout of the cluster's keys under the prefix P:
//
//	P/meta              the pinned shard count (meta.go)
//	P/members/<id>      a live replica, on its lease (member.go)
//	P/shards/<nnnn>     a shard's owner replica ID, on the owner's lease
//	P/leader/...        the compaction leader's election (leader.go)
//
// Shard numbers have at least 4 digits, zero-padded, so keys sort as the
// numbers do.
type keys struct {
	prefix string
	shards []string // the key of each shard
}

func newKeys(prefix string, shards int) keys {
	width := max(4, len(strconv.Itoa(shards-1)))
	k := keys{prefix: prefix, shards: make([]string, shards)}
	for s := range k.shards {
		k.shards[s] = fmt.Sprintf("%sshards/%0*d", prefix, width, s)
	}
	return k
}

func (k keys) meta() string            { return k.prefix + "meta" }
func (k keys) member(id string) string { return k.prefix + "members/" + id }
func (k keys) shard(s int) string      { return k.shards[s] }
func (k keys) election() string        { return k.prefix + "leader/" }
func (k keys) memberPrefix() string    { return k.prefix + "members/" }
func (k keys) shardPrefix() string     { return k.prefix + "shards/" }

// watched is the key range of the view, [start, end): from P/members/ to
// the end of P/shards/, read whole at a join or a reload. It also holds
// P/meta, which the view ignores.
func (k keys) watched() (start, end string) {
	return k.memberPrefix(), clientv3.GetPrefixRangeEnd(k.shardPrefix())
}

// parseMember returns the replica ID of a member key.
func (k keys) parseMember(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, k.memberPrefix())
	return id, ok && id != ""
}

// parseShard returns the shard of a shard key.
func (k keys) parseShard(key string) (int, bool) {
	n, ok := strings.CutPrefix(key, k.shardPrefix())
	if !ok {
		return 0, false
	}
	s, err := strconv.Atoi(n)
	if err != nil || s < 0 || s >= len(k.shards) || k.shards[s] != key {
		return 0, false
	}
	return s, true
}
