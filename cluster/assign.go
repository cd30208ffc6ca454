package cluster

import (
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Assignment: rendezvous hashing (highest random weight) names each
// shard's desired owner among the eligible members. Adding a member moves
// only the shards it wins (about 1/N of them), removing one moves only
// the shards it had, and every replica computes the same answer from the
// same keys, with no coordination.
//
// Eligible members:
//   - when no member is settled (a cluster starting), all of them, so the
//     shards spread at once;
//   - otherwise the settled ones (members for at least Settle), plus the
//     members that already own shards: a newcomer takes work from others
//     only once settled (a replica that flaps never takes shards), and a
//     member that already works is not stripped of its shards because it
//     joined moments after the others (the cluster's start).
//
// Settledness uses each member's join time, written by its own clock, and
// the local clock: replicas whose clocks differ by d may disagree for d
// about a newcomer, which delays its shards by at most d, never gives a
// shard two owners (the claim is a compare-and-set) and settles by
// itself.

// plan is what this replica should do now.
type plan struct {
	claim   []int // free shards whose desired owner is this replica
	release []int // shards this replica holds whose desired owner is another
	// releaseTo are the desired owners of the released shards.
	releaseTo []string
	keep      []int // shards this replica holds and should
	// wake is when a member becomes settled (the plan may change then);
	// zero if none is pending.
	wake time.Time
}

// assign computes the plan of replica me (holding its shards on lease
// mine) at now.
func (v *view) assign(me string, mine clientv3.LeaseID, now time.Time, settle time.Duration) plan {
	var p plan
	members := v.sorted()
	anySettled := false
	for _, m := range members {
		if at := m.joined.Add(settle); !now.Before(at) {
			anySettled = true
		} else if p.wake.IsZero() || at.Before(p.wake) {
			p.wake = at
		}
	}
	eligible := members[:0:0]
	for _, m := range members {
		if !anySettled || !now.Before(m.joined.Add(settle)) || v.heldBy(m.lease) > 0 {
			eligible = append(eligible, m)
		}
	}
	if len(eligible) == 0 {
		return p
	}
	seeds := make([]uint64, len(eligible))
	for i, m := range eligible {
		seeds[i] = seed(m.id)
	}
	for s, o := range v.owners {
		desired := eligible[pick(seeds, s)].id
		switch {
		case o.id == "" && desired == me:
			p.claim = append(p.claim, s)
		case mine != 0 && o.lease == mine && desired != me:
			p.release = append(p.release, s)
			if !slices.Contains(p.releaseTo, desired) {
				p.releaseTo = append(p.releaseTo, desired)
			}
		case mine != 0 && o.lease == mine:
			p.keep = append(p.keep, s)
		}
	}
	return p
}

// pick is the index of the seed with the highest weight for shard s (the
// first on a tie: members are sorted by ID).
func pick(seeds []uint64, s int) int {
	hs := mix(uint64(s) + 1)
	best, bestWeight := 0, uint64(0)
	for i, sd := range seeds {
		if w := mix(sd ^ hs); i == 0 || w > bestWeight {
			best, bestWeight = i, w
		}
	}
	return best
}

// seed is a member's hash: fnv-1a (64 bits) of its ID.
func seed(id string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= prime
	}
	return h
}

// mix is splitmix64's finalizer: every input bit flips each output bit
// with probability about 1/2.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
