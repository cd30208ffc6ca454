package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// statsPage is how many targets refresh asks the engine for at once.
const statsPage = 500

// statsHub computes the live figures of every target (one pass over the
// engine's targets per interval, whatever the number of pages open) and
// gives each stream what changed since it last looked. A target whose
// probes did not run is not re-encoded, nor sent.
//
// Generations: every refresh that finds changes is a new generation
// (seq); an entry records the generation it last changed in, and a
// stream the generation it has. A stream one generation behind gets the
// refresh's encoded changes (delta) as they are; one further behind (or
// new) gets every entry newer than its generation.
type statsHub struct {
	eng     *engine.Engine
	cluster Cluster // nil on a single node
	log     *slog.Logger
	kick    chan struct{} // one slot: a first stream joined, refresh now

	// pass counts refreshes; only the run goroutine uses it.
	pass uint64

	mu    sync.Mutex // guards the fields below; entries' data and seq
	seq   uint64     // generation of the last refresh that changed something
	delta []byte     // the stats message of generation seq
	// deltaOf is what delta holds, target by target, for the streams
	// whose caller reads only some targets (they get it filtered).
	deltaOf []namedStats
	// known are the figures last computed, by target name. Only the run
	// goroutine writes it (under mu), so it reads it without mu.
	known map[string]*statEntry
	subs  map[*statsSub]struct{}
	// members is the last "members" message (cluster mode), membersGen
	// counts its changes.
	members    []byte
	membersGen uint64
}

// namedStats is one target's figures in a stats message.
type namedStats struct {
	name string
	data json.RawMessage
}

type statEntry struct {
	key  statKey
	seq  uint64          // generation it last changed in; guarded by statsHub.mu
	data json.RawMessage // its statsView; guarded by statsHub.mu
	pass uint64          // last refresh that saw the target; run goroutine only
}

// statKey is what a target's figures depend on: they change only when one
// of its probes ran, its spec was replaced or (cluster mode) another
// replica probes it.
type statKey struct {
	spec   *target.Spec
	totals [probe.NumTypes]uint64
	owner  string
}

func (h *statsHub) keyOf(t *engine.Target) statKey {
	k := statKey{spec: t.Spec}
	if h.cluster != nil {
		k.owner = h.cluster.OwnerOf(t.Spec.Name)
	}
	for i := range t.Status.Probes {
		k.totals[i] = t.Status.Probes[i].ProbesTotal
	}
	return k
}

// statsSub is one stream's place in the hub.
type statsSub struct {
	// wake has one slot: the producer never blocks; a stream that missed
	// several refreshes catches up with one message.
	wake chan struct{}
	seq  uint64 // the generation the stream has; guarded by statsHub.mu
	// membersGen is the members message the stream has; guarded by
	// statsHub.mu.
	membersGen uint64
	// visible is the read filter of the stream's caller (probed
	// --authz-policy; nil: every target): its messages have only the
	// targets it accepts.
	visible func(name string) bool
}

func newStatsHub(e *engine.Engine, c Cluster, log *slog.Logger) *statsHub {
	return &statsHub{eng: e, cluster: c, log: log, kick: make(chan struct{}, 1), subs: make(map[*statsSub]struct{})}
}

// join registers a stream whose caller reads the targets visible accepts
// (nil: every one). Its wake channel fires when there are figures for it,
// at once when some are already known.
func (h *statsHub) join(visible func(name string) bool) *statsSub {
	sub := &statsSub{wake: make(chan struct{}, 1), visible: visible}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[sub] = struct{}{}
	if h.seq > 0 || h.membersGen > 0 {
		sub.wake <- struct{}{}
	}
	if len(h.subs) == 1 {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
	return sub
}

// leave unregisters a stream.
func (h *statsHub) leave(sub *statsSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sub)
}

// next returns the stats message sub has not had yet, or nil when it is up
// to date, and records that it has it. It has only the targets sub's
// caller may read.
func (h *statsHub) next(sub *statsSub) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	var changed []json.RawMessage
	switch {
	case sub.seq == h.seq:
		return nil
	case sub.seq+1 == h.seq && sub.visible == nil:
		sub.seq = h.seq
		return h.delta
	case sub.seq+1 == h.seq:
		for _, c := range h.deltaOf {
			if sub.visible(c.name) {
				changed = append(changed, c.data)
			}
		}
	default:
		for name, e := range h.known {
			if e.seq > sub.seq && (sub.visible == nil || sub.visible(name)) {
				changed = append(changed, e.data)
			}
		}
	}
	sub.seq = h.seq
	if len(changed) == 0 {
		return nil
	}
	return statsMessage(changed)
}

// nextMembers returns the members message sub has not had yet, or nil,
// and records that it has it.
func (h *statsHub) nextMembers(sub *statsSub) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sub.membersGen == h.membersGen {
		return nil
	}
	sub.membersGen = h.membersGen
	return h.members
}

// statsMessage is {"targets":[...]}.
func statsMessage(targets []json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteString(`{"targets":[`)
	for i, t := range targets {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(t)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// run refreshes every interval, and when a first stream joins, until ctx
// is done.
func (h *statsHub) run(ctx context.Context, clock clockwork.Clock, interval time.Duration) {
	t := clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		case <-h.kick:
		}
		if err := h.refresh(ctx); err != nil && ctx.Err() == nil {
			h.log.Debug("status page: computing probe figures", "err", err)
		}
	}
}

// refresh reads every target's live figures, records those that changed
// as a new generation and wakes the streams. With no stream it does
// nothing and forgets the figures: the next stream starts afresh.
func (h *statsHub) refresh(ctx context.Context) error {
	h.mu.Lock()
	idle := len(h.subs) == 0
	if idle {
		// No stream holds a generation: start over.
		h.known, h.seq, h.delta, h.deltaOf = nil, 0, nil, nil
		h.members, h.membersGen = nil, 0
	}
	h.mu.Unlock()
	if idle {
		return nil
	}
	h.pass++
	var members []byte
	if h.cluster != nil {
		members = mustJSON(viewMembers(h.cluster))
	}
	type change struct {
		name string
		key  statKey
		data json.RawMessage
	}
	var changes []change
	for after := ""; ; {
		page, more, err := h.eng.List(ctx, engine.ListOptions{After: after, Limit: statsPage})
		if err != nil {
			return err
		}
		for _, t := range page {
			key := h.keyOf(t)
			e := h.known[t.Spec.Name]
			switch {
			case e != nil && e.key == key:
				e.pass = h.pass
				continue
			case e == nil && key.totals == [probe.NumTypes]uint64{} && h.cluster == nil:
				// Never probed: nothing to show yet. (In cluster mode the
				// target's owner is, and the last message of a target
				// another replica probes.)
				continue
			}
			v := viewStats(t)
			if h.cluster != nil {
				v.Replica = &key.owner
			}
			data, err := json.Marshal(v)
			if err != nil {
				return err
			}
			changes = append(changes, change{t.Spec.Name, key, data})
		}
		if !more || len(page) == 0 {
			break
		}
		after = page[len(page)-1].Spec.Name
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.known == nil {
		h.known = make(map[string]*statEntry, len(changes))
	}
	for name, e := range h.known {
		if e.pass != h.pass {
			delete(h.known, name) // deleted target
		}
	}
	woke := false
	if members != nil && !bytes.Equal(members, h.members) {
		h.members = members
		h.membersGen++
		woke = true
	}
	if len(changes) == 0 {
		if woke {
			h.wake()
		}
		return nil
	}
	h.seq++
	data := make([]json.RawMessage, len(changes))
	h.deltaOf = make([]namedStats, len(changes))
	for i, c := range changes {
		h.known[c.name] = &statEntry{key: c.key, seq: h.seq, data: c.data, pass: h.pass}
		data[i] = c.data
		h.deltaOf[i] = namedStats{c.name, c.data}
	}
	h.delta = statsMessage(data)
	h.wake()
	return nil
}

// wake tells every stream there is something new for it; h.mu is held.
func (h *statsHub) wake() {
	for sub := range h.subs {
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}
