package etcd_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
)

// gatedKV is a client's KV whose transactions, while it is closed, wait
// at a gate: each is announced on arrived once sent and goes to etcd when
// the test lets it through, so the test decides the order in which etcd
// applies transactions in flight at once.
type gatedKV struct {
	clientv3.KV
	closed  atomic.Bool
	arrived chan *gatedTxn
	mu      sync.Mutex
	all     []*gatedTxn // every transaction that waited; guarded by mu
}

// open opens the gate and lets every transaction waiting at it through
// (a test's cleanup, so that a failed test does not leave Commits
// waiting).
func (kv *gatedKV) open() {
	kv.closed.Store(false)
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for _, t := range kv.all {
		t.through()
	}
}

func newGatedKV(kv clientv3.KV) *gatedKV {
	return &gatedKV{KV: kv, arrived: make(chan *gatedTxn, 64)}
}

func (kv *gatedKV) Txn(ctx context.Context) clientv3.Txn {
	return &gatedTxn{kv: kv, ctx: ctx, open: make(chan struct{})}
}

// gatedTxn is a transaction of a gatedKV.
type gatedTxn struct {
	kv               *gatedKV
	ctx              context.Context
	cmps             []clientv3.Cmp
	thenOps, elseOps []clientv3.Op
	open             chan struct{} // closed to let it through
	once             sync.Once
}

func (t *gatedTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.cmps = append(t.cmps, cs...); return t }
func (t *gatedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.thenOps = append(t.thenOps, ops...)
	return t
}
func (t *gatedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.elseOps = append(t.elseOps, ops...)
	return t
}

func (t *gatedTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.kv.closed.Load() {
		t.kv.mu.Lock()
		t.kv.all = append(t.kv.all, t)
		t.kv.mu.Unlock()
		t.kv.arrived <- t
		select {
		case <-t.open:
		case <-t.ctx.Done():
			return nil, t.ctx.Err()
		}
	}
	return t.kv.KV.Txn(t.ctx).If(t.cmps...).Then(t.thenOps...).Else(t.elseOps...).Commit()
}

// through lets t go to etcd.
func (t *gatedTxn) through() { t.once.Do(func() { close(t.open) }) }

// writes says whether t writes a key of the target named name.
func (t *gatedTxn) writes(name string) bool {
	for _, op := range t.thenOps {
		if k := string(op.KeyBytes()); strings.HasSuffix(k, "/specs/"+name) || strings.HasSuffix(k, "/status/"+name) {
			return true
		}
	}
	return false
}

// writer is the writer key t puts.
func (t *gatedTxn) writer() string {
	for _, op := range t.thenOps {
		if k := string(op.KeyBytes()); strings.Contains(k, "/writers/") {
			return k
		}
	}
	return ""
}

// next returns the next transaction to arrive at kv's gate.
func (kv *gatedKV) next(t *testing.T) *gatedTxn {
	t.Helper()
	select {
	case txn := <-kv.arrived:
		return txn
	case <-time.After(20 * time.Second):
		t.Fatal("no transaction arrived within 20s")
		return nil
	}
}

// TestConcurrentCommits: Commits run at once, each on a writer key of its
// own (P/writers/<id>, then P/writers/<id>/1), and etcd applies them in
// the order they reach it, which their revisions tell; a store opened
// later with the replica's ID reads both keys and writes on. Without
// the writer keys (one Commit at a time) the second never reaches etcd
// while the first is held. (Transitions: Commits that create or remove
// targets go one at a time, since they compare the same counts.)
func TestConcurrentCommits(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	kv := newGatedKV(cli.KV)
	cli.KV = kv
	s := open(t, cli, etcd.Options{ReplicaID: "a", RequestTimeout: -1})
	if got := s.CommitsInFlight(); got != etcd.MaxCommitsInFlight {
		t.Errorf("CommitsInFlight = %d, want %d", got, etcd.MaxCommitsInFlight)
	}
	created := []*engine.Change{create("first"), create("second")}
	commit(t, s, created...)
	kv.closed.Store(true)
	first, second := transition(created[0], 1), transition(created[1], 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel() // before the Wait: a Commit still waiting ends
	errs := make(chan error, 2)
	var txns []*gatedTxn
	for _, ch := range []*engine.Change{first, second} {
		wg.Go(func() { errs <- s.Commit(ctx, []*engine.Change{ch}) })
		// One at a time, so that the first takes the first writer key.
		txn := kv.next(t)
		defer txn.through() // on a failure too: the Commit ends
		if !txn.writes(ch.Name) {
			t.Fatalf("a transaction arrived that does not write %s", ch.Name)
		}
		txns = append(txns, txn)
	}
	for i, want := range []string{"/probed/writers/a", "/probed/writers/a/1"} {
		if got := txns[i].writer(); got != want {
			t.Errorf("transaction %d puts %s, want %s", i, got, want)
		}
	}
	// Through in reverse order: etcd applies the second first.
	txns[1].through()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	txns[0].through()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if second.Event.Revision >= first.Event.Revision {
		t.Errorf("second at %d, first at %d; want the second first, as etcd applied them", second.Event.Revision, first.Event.Revision)
	}
	kv.closed.Store(false)

	// A later store of the replica reads both keys: it writes on them
	// without a retry (nothing of it is found moved).
	var log strings.Builder
	later := open(t, c.Client(t), etcd.Options{ReplicaID: "a", Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &log}, nil))})
	var more sync.WaitGroup
	for i := range 8 {
		more.Go(func() {
			if err := later.Commit(t.Context(), []*engine.Change{create(fmt.Sprintf("more-%d", i))}); err != nil {
				t.Error(err)
			}
		})
	}
	more.Wait()
	if strings.Contains(log.String(), "was written by") {
		t.Errorf("the later store found a writer key moved:\n%s", log.String())
	}
	if st := load(t, later); len(st.Targets) != 10 {
		t.Errorf("%d targets stored, want 10", len(st.Targets))
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestConcurrentLostAnswersAppliedOnce: Commits in flight at once whose
// transactions were applied but whose answers were lost are each found
// applied by their retry, on their own writer key: every Commit succeeds
// at the revision it was applied at, and the history has each change
// once.
func TestConcurrentLostAnswersAppliedOnce(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	s, kv, _ := openLossy(t, c, true)
	const n = 4
	kv.lose(slices.Repeat([]fate{applied}, n)...)
	changes := make([]*engine.Change, n)
	var wg sync.WaitGroup
	for i := range changes {
		changes[i] = create(fmt.Sprintf("web-%d", i))
		wg.Go(func() {
			if err := s.Commit(t.Context(), []*engine.Change{changes[i]}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if kv.sent != 2*n+1 { // with Open's
		t.Errorf("%d transactions sent, want %d (each lost once, then found applied)", kv.sent-1, 2*n)
	}
	st := load(t, open(t, c.Client(t), etcd.Options{ReplicaID: "b"}))
	if len(st.Events) != n {
		t.Fatalf("history %v, want %d events, one per change", revisions(st.Events), n)
	}
	for _, ch := range changes {
		if !slices.ContainsFunc(st.Events, func(ev engine.Event) bool { return ev.Revision == ch.Event.Revision && ev.Name == ch.Name }) {
			t.Errorf("%s committed at %d, not in the history %v", ch.Name, ch.Event.Revision, revisions(st.Events))
		}
	}
}
