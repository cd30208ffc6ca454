package ui

import (
	"cmp"
	"slices"
	"time"
)

// Cluster describes the replicas of a cluster (probed --store=etcd) to
// the page: which replica probes each target, and the live replicas. A
// single probed has none (Options.Cluster nil) and the page shows neither.
type Cluster interface {
	// OwnerOf returns the id of the replica that probes the named target,
	// or "" when none does right now (its shard is changing hands).
	OwnerOf(name string) string
	// Members returns the live replicas.
	Members() []Member
	// Self is this replica's id.
	Self() string
	// Shards is the number of shards targets are spread over.
	Shards() int
}

// Member is one live replica.
type Member struct {
	ID     string
	Addr   string
	Shards int // how many shards it owns
	Joined time.Time
}

// membersView is the "members" message: the live replicas, by id.
type membersView struct {
	Self    string       `json:"self"`
	Shards  int          `json:"shards"`
	Members []memberView `json:"members"`
}

type memberView struct {
	ID     string `json:"id"`
	Addr   string `json:"addr"`
	Shards int    `json:"shards"`
	Joined int64  `json:"joined,omitempty"` // Unix milliseconds
	Self   bool   `json:"self,omitempty"`   // the replica serving the page
}

// viewMembers returns c's members, sorted by id.
func viewMembers(c Cluster) *membersView {
	ms := c.Members()
	self := c.Self()
	v := &membersView{Self: self, Shards: c.Shards(), Members: make([]memberView, len(ms))}
	for i, m := range ms {
		v.Members[i] = memberView{ID: m.ID, Addr: m.Addr, Shards: m.Shards, Joined: unixMilli(m.Joined), Self: m.ID == self}
	}
	slices.SortFunc(v.Members, func(a, b memberView) int { return cmp.Compare(a.ID, b.ID) })
	return v
}

// ownerOf returns the replica that probes name: nil on a single node, so
// that views leave it out.
func (o *Options) ownerOf(name string) *string {
	if o.Cluster == nil {
		return nil
	}
	id := o.Cluster.OwnerOf(name)
	return &id
}
