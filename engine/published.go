package engine

import (
	"slices"
	"sync"
	"time"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// record is a published target in the compact form the engine keeps it:
// in the view, in the history's lifecycle events and as the committed
// status of its entry, all three sharing one record. A Target (632 B of
// status, three ProbeStatus of 168 B inline) is built from it when read
// (Get, List, Watch); a record holds only the probes that have a status
// (one for most targets) and not what is derived on read (the effective
// timing, from the spec and the server's floors). Immutable once made.
type record struct {
	spec    *target.Spec
	probes  []probeRecord // by type, only those not zero
	created time.Time
	started time.Time
	client  string
	owner   string
	rev     uint64
	// deleted is nil for an Active target not deleted (nearly all of
	// them): out of line, the record fits in 128 bytes.
	deleted *deletion
}

// deletion is the phase and deletion of a record's target when it is not
// simply Active.
type deletion struct {
	phase Phase
	time  time.Time
	grace *time.Duration
}

// probeRecord is one ProbeStatus without what is derived on read
// (Effective) or only ever added on read (Recent).
type probeRecord struct {
	typ            probe.Type
	result         probe.Result
	present        bool
	initialized    bool
	successes      int32
	failures       int32
	lastTransition time.Time
	lastProbe      time.Time
	message        string
	latency        time.Duration
	total          uint64
}

// newRecord returns the compact form of t.
func newRecord(t *Target) *record {
	s := &t.Status
	r := &record{
		spec: t.Spec, created: s.CreateTime, started: s.StartTime, client: s.Client, owner: s.Owner,
		rev: s.Revision,
	}
	if s.Phase != Active || !s.DeleteTime.IsZero() || s.DeletionGracePeriod != nil {
		r.deleted = &deletion{phase: s.Phase, time: s.DeleteTime, grace: s.DeletionGracePeriod}
	}
	n := 0
	for i := range s.Probes {
		if !zeroProbe(&s.Probes[i]) {
			n++
		}
	}
	if n == 0 {
		return r
	}
	if probes, ok := bare.of(s); ok {
		r.probes = probes
		return r
	}
	r.probes = make([]probeRecord, 0, n)
	for i := range s.Probes {
		p := &s.Probes[i]
		if zeroProbe(p) {
			continue
		}
		r.probes = append(r.probes, probeRecord{
			typ: probe.Type(i), result: p.Result, present: p.Present, initialized: p.HasInitialized,
			successes: p.ConsecutiveSuccesses, failures: p.ConsecutiveFailures,
			lastTransition: p.LastTransitionTime, lastProbe: p.LastProbeTime,
			message: p.LastMessage, latency: p.LastLatency, total: p.ProbesTotal,
		})
	}
	return r
}

// bare holds the probe lists of records whose probes have nothing but a
// result (a target just created, a CREATED event in the history: half
// the records of a registry that was just filled), shared by all of them.
var bare bareProbes

// maxBare bounds the probe lists bareProbes shares (there are few: one
// per combination of probes and initial results in use).
const maxBare = 256

// bareProbes shares the probe lists of records by their results.
type bareProbes struct {
	mu sync.Mutex
	m  map[uint32][]probeRecord
}

// of returns the shared probe list of s when its probes have nothing but
// a type, a result and the present and initialized flags; never modify
// it.
func (b *bareProbes) of(s *Status) ([]probeRecord, bool) {
	var key uint32
	for i := range s.Probes {
		p := &s.Probes[i]
		if zeroProbe(p) {
			continue
		}
		if !p.LastTransitionTime.IsZero() || p.ConsecutiveSuccesses != 0 || p.ConsecutiveFailures != 0 ||
			!p.LastProbeTime.IsZero() || p.LastMessage != "" || p.LastLatency != 0 || p.ProbesTotal != 0 || p.Result > 15 {
			return nil, false
		}
		bits := uint32(1 | uint32(p.Result)<<1 | b2u(p.Present)<<5 | b2u(p.HasInitialized)<<6)
		key |= bits << (8 * i)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if probes, ok := b.m[key]; ok {
		return probes, true
	}
	if len(b.m) >= maxBare {
		return nil, false
	}
	var probes []probeRecord
	for i := range s.Probes {
		if p := &s.Probes[i]; !zeroProbe(p) {
			probes = append(probes, probeRecord{typ: probe.Type(i), result: p.Result, present: p.Present, initialized: p.HasInitialized})
		}
	}
	probes = slices.Clip(probes)
	if b.m == nil {
		b.m = make(map[uint32][]probeRecord)
	}
	b.m[key] = probes
	return probes, true
}

func b2u(v bool) uint32 {
	if v {
		return 1
	}
	return 0
}

// zeroProbe reports whether p holds nothing a record keeps.
func zeroProbe(p *ProbeStatus) bool {
	return !p.Present && p.Result == 0 && !p.HasInitialized && p.LastTransitionTime.IsZero() &&
		p.ConsecutiveSuccesses == 0 && p.ConsecutiveFailures == 0 && p.LastProbeTime.IsZero() &&
		p.LastMessage == "" && p.LastLatency == 0 && p.ProbesTotal == 0
}

// status returns the Status r was made from, without the effective
// timings.
func (r *record) status() Status {
	s := Status{
		Phase: r.phase(), CreateTime: r.created, StartTime: r.started, Client: r.client, Owner: r.owner,
		Revision: r.rev,
	}
	if r.deleted != nil {
		s.DeleteTime, s.DeletionGracePeriod = r.deleted.time, r.deleted.grace
	}
	for i := range r.probes {
		p := &r.probes[i]
		s.Probes[p.typ] = ProbeStatus{
			Present: p.present, Result: p.result, HasInitialized: p.initialized, LastTransitionTime: p.lastTransition,
			ConsecutiveSuccesses: p.successes, ConsecutiveFailures: p.failures, LastProbeTime: p.lastProbe,
			LastMessage: p.message, LastLatency: p.latency, ProbesTotal: p.total,
		}
	}
	return s
}

// target returns a new Target of r, the effective timing of each probe
// of its spec filled in by effective (nil: left zero).
func (r *record) target(effective func(*probe.Spec) probe.Effective) *Target {
	t := &Target{}
	r.fill(t, effective)
	return t
}

// fill makes *t a Target of r, as target does.
func (r *record) fill(t *Target, effective func(*probe.Spec) probe.Effective) {
	*t = Target{Spec: r.spec, Status: r.status()}
	if effective != nil {
		for _, typ := range probe.Types {
			if p := r.spec.Probe(typ); p != nil {
				t.Status.Probes[typ].Effective = effective(p)
			}
		}
	}
}

// probe returns the durable fields of r's status of probe typ.
func (r *record) probe(typ probe.Type) (result probe.Result, initialized bool) {
	for i := range r.probes {
		if r.probes[i].typ == typ {
			return r.probes[i].result, r.probes[i].initialized
		}
	}
	return 0, false
}

// present reports whether r has a status of probe typ.
func (r *record) present(typ probe.Type) bool {
	for i := range r.probes {
		if r.probes[i].typ == typ {
			return r.probes[i].present
		}
	}
	return false
}

// Started, Ready and Live are Status's.

func (r *record) Started() bool {
	res, _ := r.probe(probe.Startup)
	return !r.present(probe.Startup) || res == probe.Success
}

func (r *record) Ready() bool {
	res, _ := r.probe(probe.Readiness)
	return r.phase() == Active && r.Started() && (!r.present(probe.Readiness) || res == probe.Success)
}

func (r *record) name() string { return r.spec.Name }

func (r *record) phase() Phase {
	if r.deleted == nil {
		return Active
	}
	return r.deleted.phase
}

func (r *record) deleteTime() time.Time {
	if r.deleted == nil {
		return time.Time{}
	}
	return r.deleted.time
}

func (r *record) grace() *time.Duration {
	if r.deleted == nil {
		return nil
	}
	return r.deleted.grace
}
