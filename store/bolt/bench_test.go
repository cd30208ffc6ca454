package bolt_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/store/bolt"
	"github.com/probed/probed/store/storetest"
)

var batchSizes = []int{1, 10, 100, 1000}

// BenchmarkCommitRegistrations commits batches of registrations: each
// change writes a spec, a status and a CREATED event carrying the target,
// all in one transaction and one fsync per batch. One op is one batch.
func BenchmarkCommitRegistrations(b *testing.B) {
	for _, n := range batchSizes {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s := mustOpenB(b)
			changes := make([]*engine.Change, n)
			i := 0
			for b.Loop() {
				for j := range changes {
					changes[j] = storetest.Create(storetest.WebSpec(fmt.Sprintf("target-%d", i)), storetest.Epoch)
					i++
				}
				if err := s.Commit(b.Context(), changes); err != nil {
					b.Fatal(err)
				}
			}
			perSec := float64(i) / b.Elapsed().Seconds()
			b.ReportMetric(perSec, "registrations/s")
			b.ReportMetric(perSec, "events/s")
		})
	}
}

// BenchmarkCommitTransitions commits batches of probe transitions of n
// registered targets: each change writes a status and a TRANSITION event.
// One op is one batch.
func BenchmarkCommitTransitions(b *testing.B) {
	for _, n := range batchSizes {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s := mustOpenB(b)
			targets := make([]*engine.Target, n)
			changes := make([]*engine.Change, n)
			for j := range targets {
				changes[j] = storetest.Create(storetest.WebSpec(fmt.Sprintf("target-%d", j)), storetest.Epoch)
				targets[j] = changes[j].Target
			}
			if err := s.Commit(b.Context(), changes); err != nil {
				b.Fatal(err)
			}
			results := [...]probe.Result{probe.Success, probe.Failure}
			events := 0
			for b.Loop() {
				for j, tg := range targets {
					changes[j] = storetest.Transition(tg, probe.Readiness, results[events%2], 1, storetest.Epoch)
					targets[j] = changes[j].Target
				}
				events += n
				if err := s.Commit(b.Context(), changes); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkOpen opens (and Loads) a store of 1,000 targets and 100,000
// events, with the full page check on Open and without it.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	s := mustOpen(b, dir)
	const targets, events = 1000, 100_000
	changes := make([]*engine.Change, 0, targets)
	tgs := make([]*engine.Target, 0, targets)
	for j := range targets {
		c := storetest.Create(storetest.WebSpec(fmt.Sprintf("target-%d", j)), storetest.Epoch)
		changes = append(changes, c)
		tgs = append(tgs, c.Target)
	}
	if err := s.Commit(b.Context(), changes); err != nil {
		b.Fatal(err)
	}
	for i := targets; i < events; i += targets {
		for j, tg := range tgs {
			changes[j] = storetest.Transition(tg, probe.Readiness, probe.Result(1+i/targets%2), 1, storetest.Epoch)
			tgs[j] = changes[j].Target
		}
		if err := s.Commit(b.Context(), changes); err != nil {
			b.Fatal(err)
		}
	}
	closeStore(b, s)
	fi, err := os.Stat(filepath.Join(dir, bolt.FileName))
	if err != nil {
		b.Fatal(err)
	}
	for _, check := range []bool{true, false} {
		b.Run(fmt.Sprintf("check=%t", check), func(b *testing.B) {
			for b.Loop() {
				s := mustOpen(b, dir, bolt.WithCheck(check))
				b.StopTimer()
				closeStore(b, s)
				b.StartTimer()
			}
			b.ReportMetric(float64(fi.Size())/1e6, "file-MB")
		})
	}
	b.Run("load", func(b *testing.B) {
		s := mustOpen(b, dir)
		defer closeStore(b, s)
		for b.Loop() {
			st, err := s.Load(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			if len(st.Targets) != targets || len(st.Events) != events {
				b.Fatalf("Load() = %d targets, %d events; want %d, %d", len(st.Targets), len(st.Events), targets, events)
			}
		}
	})
}

func mustOpenB(b *testing.B) *bolt.Store {
	s := mustOpen(b, b.TempDir())
	b.Cleanup(func() { closeStore(b, s) })
	return s
}
