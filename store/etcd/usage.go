package etcd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
)

// Counting targets (issue 33). P/usage/total and P/usage/clients/<client>
// hold how many targets are stored, in total and per client (the identity
// that created them, Status.Client). Every Commit that creates or removes
// targets updates them in the same transaction, comparing each one's mod
// revision with what this store last saw, and refuses, before sending, a
// create that would take a count past its limit (EnforceLimits): the
// limits hold across replicas exactly, whatever each admits meanwhile. A
// compare that fails (another replica counted meanwhile) reads the counts
// in the transaction's other branch and sends the transaction again.
//
// The counts cannot drift through a crash (they change in the
// transactions that change what they count). They can through writers
// that do not count: a probed from before them, or an operator's etcdctl.
// Load compares them with the targets it read and corrects the
// difference (repairUsage).

// usage is the store's state of the counts.
type usage struct {
	// total and perClient are the limits (0: none), set by EnforceLimits
	// before Load.
	total, perClient atomic.Int64
	// off: nothing is counted (the baseline of the benchmark).
	off bool

	// mu is held by a Commit that counts, for all its attempts: two
	// Commits of this store comparing the same count would refuse each
	// other.
	mu sync.Mutex
	// known are the counts as this store last saw them, by key; guarded
	// by mu. A key not there is taken as absent (0), which the compare
	// checks.
	known map[string]counted
}

// counted is one count and its key's mod revision (0: absent).
type counted struct {
	n, rev int64
}

// counting is what one Commit changes in the counts.
type counting struct {
	keys  []string         // sorted
	delta map[string]int64 // by key
	// adds are the created targets that count for each key, in the
	// order of the batch (those refused first are the last).
	adds map[string][]string
}

// EnforceLimits sets the most targets the cluster may hold in total and
// per client (engine.LimitedStore; 0: no limit). Call it before Load.
func (s *Store) EnforceLimits(total, perClient int) {
	s.usage.total.Store(int64(total))
	s.usage.perClient.Store(int64(perClient))
}

// ChangeCost is what c takes of a transaction's operations
// (engine.BatchCoster): its spec and status (2), and for a create or a
// removal the count of its client's targets (1 more). BatchLimits' changes
// are etcd's 128 less the 3 every transaction takes (P/events, its writer
// key, the total count).
func (s *Store) ChangeCost(c *engine.Change) int {
	if !s.usage.off && counts(c) != 0 {
		return opsPerChange + 1
	}
	return opsPerChange
}

// counts is what c changes in its counts: 1 for a create (Create, or its
// CREATED event: what makes a target exist), -1 for a removal.
func counts(c *engine.Change) int64 {
	switch {
	case c.Delete:
		return -1
	case c.Create, c.Event.Kind == engine.KindCreated:
		return 1
	}
	return 0
}

var _ engine.LimitedStore = (*Store)(nil)

// clientOf is the client that created the target of c ("" when unknown).
func clientOf(c *engine.Change) string {
	switch {
	case c.Target != nil:
		return c.Target.Status.Client
	case c.Event.Target != nil:
		return c.Event.Target.Status.Client
	}
	return ""
}

// count is what changes, a batch, changes in the counts (nil: nothing).
func (s *Store) count(changes []*engine.Change) *counting {
	if s.usage.off {
		return nil
	}
	var ct *counting
	add := func(key string, d int64, name string) {
		if ct == nil {
			ct = &counting{delta: make(map[string]int64), adds: make(map[string][]string)}
		}
		ct.delta[key] += d
		if d > 0 {
			ct.adds[key] = append(ct.adds[key], name)
		}
	}
	for _, c := range changes {
		d := counts(c)
		if d == 0 {
			continue
		}
		add(s.keys.UsageTotal(), d, c.Name)
		if client := clientOf(c); client != "" {
			add(s.keys.UsageClient(client), d, c.Name)
		}
	}
	if ct == nil {
		return nil
	}
	ct.keys = slices.Sorted(maps.Keys(ct.delta))
	return ct
}

// overLimits returns the creates of ct that would take a count past its
// limit, as refusals; usage.mu held. A count that says so is read again
// first (another replica may have removed targets since this store saw
// it).
func (s *Store) overLimitsLocked(ctx context.Context, ct *counting) (map[string]error, error) {
	over := s.overLocked(ct)
	if len(over) == 0 {
		return nil, nil
	}
	if err := s.readCountsLocked(ctx, ct.keys); err != nil {
		return nil, err
	}
	return s.overLocked(ct), nil
}

// overLocked is overLimitsLocked with the counts as known; usage.mu held.
func (s *Store) overLocked(ct *counting) map[string]error {
	var refused map[string]error
	for _, key := range ct.keys {
		total := key == s.keys.UsageTotal()
		limit := s.usage.perClient.Load()
		if total {
			limit = s.usage.total.Load()
		}
		after := s.usage.known[key].n + ct.delta[key]
		if limit <= 0 || after <= limit {
			continue
		}
		adds := ct.adds[key]
		excess := min(int(after-limit), len(adds))
		for _, name := range adds[len(adds)-excess:] {
			if refused == nil {
				refused = make(map[string]error)
			}
			if total {
				refused[name] = fmt.Errorf("target %q: the cluster holds at most %d targets (--max-targets): %w", name, limit, engine.ErrResourceExhausted)
			} else {
				refused[name] = fmt.Errorf("target %q: %q already has %d targets in the cluster, the most one client may have (--max-targets-per-client): %w",
					name, key[len(s.keys.UsageClient("")):], limit, engine.ErrResourceExhausted)
			}
		}
	}
	return refused
}

// readCountsLocked reads the counts of keys from etcd; usage.mu held.
func (s *Store) readCountsLocked(ctx context.Context, keys []string) error {
	ops := make([]clientv3.Op, len(keys))
	for i, key := range keys {
		ops[i] = clientv3.OpGet(key)
	}
	var resp *clientv3.TxnResponse
	err := s.retry(ctx, "count", func(rctx context.Context) (err error) {
		resp, err = s.cli.Txn(rctx).Then(ops...).Commit()
		return err
	})
	if err != nil {
		return fmt.Errorf("etcd store: read the counts of targets: %w", err)
	}
	for i, key := range keys {
		s.learnLocked(key, resp.Responses[i].GetResponseRange().GetKvs())
	}
	return nil
}

// learnLocked records what a read of key found (kvs: none when absent);
// usage.mu held. It reports whether that differs from what was known.
func (s *Store) learnLocked(key string, kvs []*mvccpb.KeyValue) bool {
	var now counted
	if len(kvs) > 0 {
		now = counted{n: s.parseCount(kvs[0]), rev: kvs[0].ModRevision}
	}
	if s.usage.known == nil {
		s.usage.known = make(map[string]counted)
	}
	moved := s.usage.known[key] != now
	s.usage.known[key] = now
	return moved
}

// parseCount is a count's value; one that is not a number reads as 0
// (logged): Load's repair corrects it.
func (s *Store) parseCount(kv *mvccpb.KeyValue) int64 {
	n, err := strconv.ParseInt(string(kv.Value), 10, 64)
	if err != nil {
		s.log.Warn("etcd store: a count of targets is not a number; counting from 0 until a Load repairs it", "key", string(kv.Key), "value", string(kv.Value))
		return 0
	}
	return n
}

// countOps are the compares, writes and reads of ct in a transaction;
// usage.mu held.
func (s *Store) countOpsLocked(ct *counting) (cmps []clientv3.Cmp, puts, reads []clientv3.Op) {
	for _, key := range ct.keys {
		k := s.usage.known[key]
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", k.rev))
		if n := k.n + ct.delta[key]; n == 0 && key != s.keys.UsageTotal() {
			puts = append(puts, clientv3.OpDelete(key)) // a client without targets leaves no key
		} else {
			puts = append(puts, clientv3.OpPut(key, strconv.FormatInt(n, 10)))
		}
		reads = append(reads, clientv3.OpGet(key))
	}
	return cmps, puts, reads
}

// countedLocked records the counts ct's transaction wrote at etcd
// revision rev; usage.mu held.
func (s *Store) countedLocked(ct *counting, rev int64) {
	if s.usage.known == nil {
		s.usage.known = make(map[string]counted)
	}
	for _, key := range ct.keys {
		n := s.usage.known[key].n + ct.delta[key]
		if n == 0 && key != s.keys.UsageTotal() {
			s.usage.known[key] = counted{}
			continue
		}
		s.usage.known[key] = counted{n: n, rev: rev}
	}
}

// usageAt is what Load read of the counts at its revision, and the mod
// revision of P/usage/repaired there.
type usageAt struct {
	counts   map[string]counted
	repaired int64
}

// readUsage reads the counts at revision rev.
func (s *Store) readUsage(ctx context.Context, rev int64) (*usageAt, error) {
	u := &usageAt{counts: make(map[string]counted)}
	err := s.readRange(ctx, s.keys.Usage(), clientv3.GetPrefixRangeEnd(s.keys.Usage()), rev, func(kv *mvccpb.KeyValue) error {
		if string(kv.Key) == s.keys.UsageRepaired() {
			u.repaired = kv.ModRevision
			return nil
		}
		u.counts[string(kv.Key)] = counted{n: s.parseCount(kv), rev: kv.ModRevision}
		return nil
	})
	return u, err
}

// usageFix is what the counts at a Load's revision lack (by key), given
// the targets it read there.
func (s *Store) usageFix(u *usageAt, targets []*engine.Target) map[string]int64 {
	want := map[string]int64{s.keys.UsageTotal(): int64(len(targets))}
	for _, t := range targets {
		if t.Status.Client != "" {
			want[s.keys.UsageClient(t.Status.Client)]++
		}
	}
	fix := make(map[string]int64)
	for key, n := range want {
		if d := n - u.counts[key].n; d != 0 {
			fix[key] = d
		}
	}
	for key, c := range u.counts {
		if _, ok := want[key]; !ok && c.n != 0 {
			fix[key] = -c.n
		}
	}
	return fix
}

// repairAttempts bounds the attempts of repairUsage against Commits
// counting at the same time.
const repairAttempts = 10

// repairUsage corrects the counts by fix, what they lacked at etcd
// revision rev (u: what they were there). The correction is added to
// what they are now (what was counted after rev was counted right), in
// one transaction that compares P/usage/repaired with its revision at
// rev: a replica that corrected them since rev did the same correction,
// and this one then stops. A count changed meanwhile by a Commit is read
// again and the transaction sent again.
func (s *Store) repairUsage(ctx context.Context, rev int64, u *usageAt, fix map[string]int64) error {
	keys := slices.Sorted(maps.Keys(fix))
	cur := make(map[string]counted, len(keys))
	for _, key := range keys {
		cur[key] = u.counts[key]
	}
	for range repairAttempts {
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.keys.UsageRepaired()), "=", u.repaired)}
		ops := []clientv3.Op{clientv3.OpPut(s.keys.UsageRepaired(), strconv.FormatInt(rev, 10))}
		reads := []clientv3.Op{clientv3.OpGet(s.keys.UsageRepaired())}
		for _, key := range keys {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", cur[key].rev))
			if n := max(0, cur[key].n+fix[key]); n == 0 && key != s.keys.UsageTotal() {
				ops = append(ops, clientv3.OpDelete(key))
			} else {
				ops = append(ops, clientv3.OpPut(key, strconv.FormatInt(n, 10)))
			}
			reads = append(reads, clientv3.OpGet(key))
		}
		var resp *clientv3.TxnResponse
		err := s.retry(ctx, "repair counts", func(rctx context.Context) (err error) {
			resp, err = s.cli.Txn(rctx).If(cmps...).Then(ops...).Else(reads...).Commit()
			return err
		})
		switch {
		case err != nil:
			return err
		case resp.Succeeded:
			s.log.Warn("etcd store: the counts of targets differed from the targets stored (written by a probed that does not count, or by hand); corrected",
				"revision", rev, "corrections", fix)
			return nil
		case len(resp.Responses[0].GetResponseRange().GetKvs()) > 0 &&
			resp.Responses[0].GetResponseRange().GetKvs()[0].ModRevision != u.repaired:
			return nil // another replica corrected them since rev
		}
		for i, key := range keys {
			var c counted
			if kvs := resp.Responses[i+1].GetResponseRange().GetKvs(); len(kvs) > 0 {
				c = counted{n: s.parseCount(kvs[0]), rev: kvs[0].ModRevision}
			}
			cur[key] = c
		}
	}
	return fmt.Errorf("etcd store: the counts of targets changed %d times while being corrected", repairAttempts)
}
