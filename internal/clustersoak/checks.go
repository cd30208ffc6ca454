package clustersoak

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/keyspace"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/store/codec"
)

// checkReadiness waits until every running replica reports each fleet
// target's readiness as its backend answers (the truth), up to the
// failover bound and 30 s more.
func (s *soak) checkReadiness(ctx context.Context, rep *Report) {
	limit := s.cfg.bound() + 30*time.Second
	deadline := time.Now().Add(limit)
	for {
		var wrong []string
		for _, r := range s.replicas {
			if r.state() != running {
				continue
			}
			ready, err := s.fleetReadiness(ctx, r)
			if err != nil {
				wrong = append(wrong, fmt.Sprintf("%s: %v", r.id, err))
				continue
			}
			bad, example := 0, ""
			for i := range s.cfg.Targets {
				got, ok := ready[fleetName(i)]
				if want := s.backend.targets[i].healthy.Load(); !ok || got != want {
					bad++
					example = fmt.Sprintf("%s ready=%v (listed %v), its backend healthy=%v", fleetName(i), got, ok, want)
				}
			}
			if bad > 0 {
				wrong = append(wrong, fmt.Sprintf("%s: %d targets wrong, e.g. %s", r.id, bad, example))
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) || sleep(ctx, 200*time.Millisecond) != nil {
			for _, w := range wrong {
				rep.violate(InvReadiness, fmt.Sprintf("%v after the last flip: %s", limit, w))
			}
			return
		}
	}
}

// checkWatchers compares what each replica's watcher delivered with
// etcd's history of P/events up to etcd's current revision, and counts
// every fleet target's readiness transitions against its flips.
func (s *soak) checkWatchers(ctx context.Context, rep *Report) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err := s.cli.Get(cctx, "/probed/meta")
	cancel()
	if err != nil {
		rep.violate(InvWatch, fmt.Sprintf("etcd's revision: %v", err))
		return
	}
	upTo := resp.Header.Revision
	pos := keyspace.Position(upTo)
	// A create after it: each watcher goes past pos without waiting for
	// a progress message.
	for _, r := range s.replicas {
		if r.state() == running {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := r.client().CreateTarget(cctx, &probev1.CreateTargetRequest{Target: s.churnSpec("z-end")})
			cancel()
			if err == nil {
				break
			}
		}
	}
	for _, w := range s.watchers {
		for deadline := time.Now().Add(time.Minute); w.position() < pos; {
			if time.Now().After(deadline) || sleep(ctx, 50*time.Millisecond) != nil {
				rep.violate(InvWatch, fmt.Sprintf("the watcher of %s is at revision %d a minute after etcd revision %d (%d)", s.replicas[w.home].id, w.position(), upTo, pos))
				break
			}
		}
	}
	history, err := etcdHistory(ctx, s.cli, "/probed/events", upTo)
	if err != nil {
		rep.violate(InvWatch, err.Error())
		return
	}
	type key struct {
		rev  uint64
		name string
	}
	var want []key
	for _, ev := range history {
		changes, err := codec.UnmarshalBatch(ev.Kv.Value)
		if err != nil {
			rep.violate(InvWatch, fmt.Sprintf("P/events at etcd revision %d: %v", ev.Kv.ModRevision, err))
			return
		}
		for i, c := range changes {
			want = append(want, key{rev: uint64(ev.Kv.ModRevision)<<10 | uint64(i), name: c.Name})
		}
	}
	rep.Events = len(want)
	var first []event
	for n, w := range s.watchers {
		events, problems := w.upTo(pos)
		id := s.replicas[w.home].id
		for _, p := range problems {
			rep.violate(InvWatch, fmt.Sprintf("the watcher of %s: %s", id, p))
		}
		got := make([]key, len(events))
		for i, e := range events {
			got[i] = key{rev: e.rev, name: e.name}
		}
		if i := firstDifference(got, want); i >= 0 {
			rep.violate(InvWatch, fmt.Sprintf("the watcher of %s delivered %d events up to etcd revision %d, etcd holds %d; first difference at #%d: %s", id, len(got), upTo, len(want), i, keyAt(got, want, i)))
		}
		if n == 0 {
			first = events
		} else if i := firstDifference(events, first); i >= 0 {
			rep.violate(InvWatch, fmt.Sprintf("the watchers of %s and %s differ at event #%d", id, s.replicas[s.watchers[0].home].id, i))
		}
		w.mu.Lock()
		rep.Streams = append(rep.Streams, fmt.Sprintf("%s %d (%d away)", id, w.streams, w.away))
		w.mu.Unlock()

		counts, chain := readinessFlips(events, s.flipsFrom)
		for _, p := range chain {
			rep.violate(InvFlips, fmt.Sprintf("the watcher of %s: %s", id, p))
		}
		missed, extra := 0, 0
		example := ""
		for i := range s.cfg.Targets {
			got, flips := counts[fleetName(i)], s.backend.flipsOf(i)
			if got != flips {
				example = fmt.Sprintf("%s: %d transitions for %d flips", fleetName(i), got, flips)
				if got < flips {
					missed += flips - got
				} else {
					extra += got - flips
				}
			}
		}
		if missed+extra > 0 {
			rep.violate(InvFlips, fmt.Sprintf("the watcher of %s: %d flips without their transition, %d transitions without a flip; e.g. %s", id, missed, extra, example))
		}
	}
	for i := range s.cfg.Targets {
		rep.Flips += s.backend.flipsOf(i)
	}
}

func keyAt[T any](got, want []T, i int) string {
	g, w := any("nothing"), any("nothing")
	if i < len(got) {
		g = got[i]
	}
	if i < len(want) {
		w = want[i]
	}
	return fmt.Sprintf("delivered %+v, etcd %+v", g, w)
}

// etcdHistory returns the events of key from etcd revision 1 to upTo,
// read with a watch (etcd's only history read).
func etcdHistory(ctx context.Context, cli *clientv3.Client, key string, upTo int64) ([]*clientv3.Event, error) {
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), time.Minute)
	defer cancel()
	wch := cli.Watch(ctx, key, clientv3.WithRev(1))
	// A progress notification comes once the watch has caught up.
	var asking sync.WaitGroup
	defer asking.Wait()
	defer cancel()
	asking.Go(func() {
		for ctx.Err() == nil {
			_ = cli.RequestProgress(ctx)
			_ = sleep(ctx, 100*time.Millisecond)
		}
	})
	var out []*clientv3.Event
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return nil, fmt.Errorf("etcd's history of %s: %w", key, err)
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > upTo {
				return out, nil
			}
			out = append(out, ev)
		}
		if resp.IsProgressNotify() && resp.Header.Revision >= upTo {
			return out, nil
		}
	}
	return nil, fmt.Errorf("etcd's history of %s: the watch ended before revision %d", key, upTo)
}

// checkWrites lists the churn targets on every running replica: each
// acknowledged create is there unless an acknowledged delete followed,
// and no acknowledged delete is undone.
func (s *soak) checkWrites(ctx context.Context, rep *Report) {
	want, res := s.churn.expect()
	rep.Creates, rep.Deletes, rep.Uncertain = res.Creates, res.Deletes, res.Uncertain
	for i, l := range res.Lost {
		rep.violate(InvWrites, l+"; the fault before: "+s.faultBefore(res.LostAt[i])+"; "+s.eventsOf(strings.SplitN(l, ":", 2)[0]))
	}
	lost := len(res.Lost)
	for _, r := range s.replicas {
		if r.state() != running {
			continue
		}
		ts, err := list(ctx, r, "churn")
		if err != nil {
			rep.violate(InvWrites, fmt.Sprintf("%s: %v", r.id, err))
			continue
		}
		have := make(map[string]bool, len(ts))
		for _, t := range ts {
			have[t.GetName()] = true
		}
		var wrong []string
		for name, alive := range want {
			if have[name] != alive {
				wrong = append(wrong, fmt.Sprintf("%s (acknowledged alive=%v)", name, alive))
			}
		}
		sort.Strings(wrong)
		if len(wrong) > 0 {
			lost = max(lost, len(wrong))
			rep.violate(InvWrites, fmt.Sprintf("%s: %d acknowledged writes lost: %v", r.id, len(wrong), wrong[:min(len(wrong), 5)]))
		}
	}
	rep.WritesLost = lost
}

// eventsOf describes the events of target name the first watcher
// delivered.
func (s *soak) eventsOf(name string) string {
	events, _ := s.watchers[0].upTo(^uint64(0))
	var out []string
	for _, e := range events {
		if e.name == name {
			out = append(out, fmt.Sprintf("%s@%d", strings.TrimPrefix(e.kind.String(), "EVENT_KIND_"), e.rev>>10))
		}
	}
	return "its events (etcd revisions): " + strings.Join(out, " ")
}

// checkProbes reads what the backends saw over the fault phase: the
// longest any target went unprobed, the failover of each kill and stop,
// and the windows in which two replicas probed one target.
func (s *soak) checkProbes(rep *Report, from, to time.Time) {
	if n := s.backend.strays.Load(); n > 0 {
		rep.violate(InvStray, fmt.Sprintf("%d probes whose User-Agent names no replica", n))
	}
	var failovers []time.Duration
	for i := range s.cfg.Targets {
		probes := s.backend.probesOf(i)
		g := longestGap(probes, from, to)
		if g.length > rep.LongestGap {
			rep.LongestGap = g.length
		}
		if g.length > s.cfg.bound() {
			rep.violate(InvFailover, fmt.Sprintf("%s went %v without a probe (from +%v), more than 2 × TTL + one period + slack = %v; the fault before: %s",
				fleetName(i), g.length.Round(time.Millisecond), g.start.Sub(from).Round(time.Millisecond), s.cfg.bound(), s.faultBefore(g.end)))
		}
		for _, w := range doubleWindows(probes, 2*s.cfg.Period) {
			rep.DoubleWindows++
			rep.LongestDouble = max(rep.LongestDouble, w.length())
			if w.length() > s.cfg.Period {
				rep.violate(InvDouble, fmt.Sprintf("%s probed by r%d and r%d for %v (at +%v), more than one period; the fault before: %s",
					fleetName(i), w.slots[0], w.slots[1], w.length().Round(time.Millisecond), w.start.Sub(from).Round(time.Millisecond), s.faultBefore(w.start)))
			}
		}
		for _, f := range s.faults {
			if f.slot == 0 {
				continue
			}
			if slot, ok := proberAt(probes, f.at); ok && slot == f.slot {
				if d, ok := failoverTime(probes, f.slot, f.at); ok {
					failovers = append(failovers, d)
				} else {
					rep.violate(InvFailover, fmt.Sprintf("%s, probed by %s at its %s, never probed by another replica after it", fleetName(i), f.victim, f.kind))
				}
			}
		}
	}
	rep.FailoverTargets = len(failovers)
	rep.FailoverP50, rep.FailoverP99 = percentile(failovers, 50), percentile(failovers, 99)
	rep.FailoverMax = percentile(failovers, 100)
}

// faultBefore names the last fault before at.
func (s *soak) faultBefore(at time.Time) string {
	desc := "none"
	for _, f := range s.faults {
		if f.at.After(at) {
			break
		}
		desc = fmt.Sprintf("%s of %s, %v earlier", f.kind, f.victim, at.Sub(f.at).Round(time.Millisecond))
	}
	return desc
}

// checkUsage judges each replica process that lived long enough: its RSS
// and goroutines at the end against those after its warm-up.
func (s *soak) checkUsage(rep *Report) {
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	keys := make([]string, 0, len(s.usage))
	for k := range s.usage {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		base, end, ok, problem := defaultFlatness.judge(s.starts[k], s.usage[k])
		if !ok {
			continue
		}
		rep.Usage = append(rep.Usage, fmt.Sprintf("%s RSS %d→%d MiB, goroutines %d→%d", k, base.rss>>20, end.rss>>20, base.goroutines, end.goroutines))
		if problem != "" {
			rep.violate(InvUsage, k+": "+problem)
		}
	}
}
