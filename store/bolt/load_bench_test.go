package bolt

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/codec"
	"github.com/probed/probed/store/storetest"
)

// BenchmarkLoadFormat loads the same data from a file of each value format,
// side by side: schema 1 (encoding/json of the engine types, what the
// store wrote before store/codec) and the current one (store/codec). Both
// run the same load function (Store.Load's), differing only in how values
// decode. Data sets: targets = 100,000 targets (storetest.WebSpec, each
// with one transition in its status) and no events; events = 1,000 such
// targets and 100,000 transition events. Each sub-benchmark also reports
// the file size and the mean stored size of a spec, a status and an event.
//
//	go test -run '^$' -bench LoadFormat -count 6 ./store/bolt
func BenchmarkLoadFormat(b *testing.B) {
	for _, ds := range []struct {
		name            string
		targets, events int
	}{
		{"targets", 100_000, 0},
		{"events", 1_000, 100_000},
	} {
		schema1, current := dataSet(b, ds.name, ds.targets, ds.events)
		for _, f := range []struct {
			name    string
			path    string
			version uint64
		}{
			{"json", schema1, 1},
			{"codec", current, SchemaVersion},
		} {
			b.Run(fmt.Sprintf("data=%s/format=%s", ds.name, f.name), func(b *testing.B) {
				db, err := bbolt.Open(f.path, 0o600, &bbolt.Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = db.Close() }()
				var cpu cpuTimer
				for b.Loop() {
					// Each Load starts from a collected heap, not with the
					// garbage of the previous one.
					b.StopTimer()
					runtime.GC()
					b.StartTimer()
					cpu.start()
					err := db.View(func(tx *bbolt.Tx) error {
						st, err := load(tx, f.path, formats[f.version])
						if err == nil && (len(st.Targets) != ds.targets || len(st.Events) != ds.events) {
							err = fmt.Errorf("loaded %d targets, %d events; want %d, %d", len(st.Targets), len(st.Events), ds.targets, ds.events)
						}
						return err
					})
					cpu.stop()
					if err != nil {
						b.Fatal(err)
					}
				}
				cpu.report(b)
				reportSizes(b, db)
			})
		}
	}
}

// cpuTimer adds up the CPU time (user and system, every thread: the
// garbage collector's too) the process spends between start and stop. On
// a machine shared with other work it varies far less than wall time.
type cpuTimer struct {
	total, begin time.Duration
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (c *cpuTimer) start() { c.begin = cpuNow() }
func (c *cpuTimer) stop()  { c.total += cpuNow() - c.begin }

// report reports the CPU time per op, in ms.
func (c *cpuTimer) report(b *testing.B) {
	b.ReportMetric(float64(c.total.Milliseconds())/float64(b.N), "cpu-ms/op")
}

// benchData caches the data sets of BenchmarkLoadFormat across -count
// runs (writing 100,000 targets takes many seconds); TestMain removes them.
var benchData struct {
	mu   sync.Mutex
	dir  string
	sets map[string][2]string // name → schema 1 file, current file
}

// dataSet returns the files of the named data set, written on first use.
func dataSet(b *testing.B, name string, targets, events int) (schema1, current string) {
	benchData.mu.Lock()
	defer benchData.mu.Unlock()
	if f, ok := benchData.sets[name]; ok {
		return f[0], f[1]
	}
	if benchData.dir == "" {
		dir, err := os.MkdirTemp("", "probed-loadformat-*")
		if err != nil {
			b.Fatal(err)
		}
		benchData.dir, benchData.sets = dir, map[string][2]string{}
	}
	dir := filepath.Join(benchData.dir, name)
	history := filepath.Join(dir, "history")
	writeDataSet(b, history, targets, events)
	// Both files are written afresh from the same values, the same way
	// (no free pages left by the history).
	current, schema1 = filepath.Join(dir, "current.db"), filepath.Join(dir, "schema1.db")
	copyData(b, filepath.Join(history, FileName), current, SchemaVersion)
	copyData(b, filepath.Join(history, FileName), schema1, 1)
	if err := os.RemoveAll(history); err != nil {
		b.Fatal(err)
	}
	benchData.sets[name] = [2]string{schema1, current}
	return schema1, current
}

// RemoveBenchData removes the data sets cached by the benchmarks.
func RemoveBenchData() error {
	benchData.mu.Lock()
	defer benchData.mu.Unlock()
	if benchData.dir == "" {
		return nil
	}
	err := os.RemoveAll(benchData.dir)
	benchData.dir, benchData.sets = "", nil
	return err
}

// writeDataSet writes a data file in dir with the current store: targets
// targets, each created and then given one transition, and events
// retained transition events (the CREATED events are compacted away).
func writeDataSet(b *testing.B, dir string, targets, events int) {
	s, err := Open(dir, WithCheck(false))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	const batch = 1000
	tgs := make([]*engine.Target, 0, targets)
	for i := 0; i < targets; i += batch {
		var changes []*engine.Change
		for j := i; j < min(i+batch, targets); j++ {
			c := storetest.Create(storetest.WebSpec(fmt.Sprintf("target-%06d", j)), storetest.Epoch)
			c.Target.Status.Client = "alice"
			changes = append(changes, c)
			tgs = append(tgs, c.Target)
		}
		commitB(b, s, changes)
	}
	transition := func(i, n int) *engine.Change {
		c := storetest.Transition(tgs[i], probe.Readiness, probe.Result(1+n%2), 2, storetest.Epoch.Add(1e9))
		tgs[i] = c.Target
		return c
	}
	for i := 0; i < targets; i += batch {
		var changes []*engine.Change
		for j := i; j < min(i+batch, targets); j++ {
			changes = append(changes, transition(j, 0))
		}
		commitB(b, s, changes)
	}
	for n := 0; n < events; n += batch {
		var changes []*engine.Change
		for j := n; j < min(n+batch, events); j++ {
			changes = append(changes, transition(j%targets, 1+j/targets))
		}
		commitB(b, s, changes)
	}
	st, err := s.Load(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	before := st.Revision + 1 // every event
	if events > 0 {
		before = st.Events[len(st.Events)-events].Revision
	}
	if err := s.Compact(b.Context(), before); err != nil {
		b.Fatal(err)
	}
}

func commitB(b *testing.B, s *Store, changes []*engine.Change) {
	if err := s.Commit(b.Context(), changes); err != nil {
		b.Fatal(err)
	}
}

// copyData writes the data file at src (current schema) to a new file at
// dst, bucket by bucket, as schema version: the same keys, and for schema
// 1 every value re-encoded with encoding/json, as the schema 1 store wrote
// them.
func copyData(b *testing.B, src, dst string, version uint64) {
	in, err := bbolt.Open(src, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	out, err := bbolt.Open(dst, 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = out.Close() }()
	reencode := map[string]func([]byte) (any, error){
		string(bucketSpecs): func(v []byte) (any, error) {
			var s target.Spec
			return &s, codec.UnmarshalSpec(v, &s)
		},
		string(bucketStatuses): func(v []byte) (any, error) {
			var s engine.Status
			return &s, codec.UnmarshalStatus(v, &s)
		},
		string(bucketEvents): func(v []byte) (any, error) {
			var ev engine.Event
			return &ev, codec.UnmarshalEvent(v, &ev)
		},
	}
	err = in.View(func(rtx *bbolt.Tx) error {
		return out.Update(func(wtx *bbolt.Tx) error {
			return rtx.ForEach(func(name []byte, rb *bbolt.Bucket) error {
				wb, err := wtx.CreateBucket(name)
				if err != nil {
					return err
				}
				if string(name) == string(bucketEvents) {
					wb.FillPercent = eventsFillPercent
				}
				return rb.ForEach(func(k, v []byte) error {
					switch {
					case string(name) == string(bucketMeta) && string(k) == string(keySchema):
						v = u64(version)
					case version == 1 && reencode[string(name)] != nil:
						val, err := reencode[string(name)](v)
						if err != nil {
							return err
						}
						if v, err = json.Marshal(val); err != nil {
							return err
						}
					}
					return wb.Put(k, v)
				})
			})
		})
	})
	if err != nil {
		b.Fatal(err)
	}
}

// reportSizes reports the file size and the mean size of the values of
// each bucket of db.
func reportSizes(b *testing.B, db *bbolt.DB) {
	err := db.View(func(tx *bbolt.Tx) error {
		b.ReportMetric(float64(tx.Size())/1e6, "file-MB")
		for _, m := range []struct {
			bucket []byte
			unit   string
		}{
			{bucketSpecs, "B/spec"},
			{bucketStatuses, "B/status"},
			{bucketEvents, "B/event"},
		} {
			n, size := 0, 0
			err := tx.Bucket(m.bucket).ForEach(func(_, v []byte) error {
				n++
				size += len(v)
				return nil
			})
			if err != nil {
				return err
			}
			if n > 0 {
				b.ReportMetric(float64(size)/float64(n), m.unit)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkUpgrade opens a copy of each schema 1 data set of
// BenchmarkLoadFormat: Open upgrades it to the current schema (one
// transaction, one fsync). The copy is not timed.
//
//	go test -run '^$' -bench Upgrade -count 6 ./store/bolt
func BenchmarkUpgrade(b *testing.B) {
	for _, ds := range []struct {
		name            string
		targets, events int
	}{
		{"targets", 100_000, 0},
		{"events", 1_000, 100_000},
	} {
		schema1, _ := dataSet(b, ds.name, ds.targets, ds.events)
		data, err := os.ReadFile(schema1)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("data="+ds.name, func(b *testing.B) {
			var cpu cpuTimer
			defer cpu.report(b)
			for b.Loop() {
				b.StopTimer()
				dir, err := os.MkdirTemp(b.TempDir(), "upgrade-*")
				if err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				b.StartTimer()
				cpu.start()
				s, err := Open(dir, WithCheck(false))
				cpu.stop()
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				if err := os.RemoveAll(dir); err != nil { // the copies are large
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
