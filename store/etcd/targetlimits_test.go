package etcd_test

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
)

// TestTargetLimitsUnderConcurrentCreates (issue 22, item 11; issue 33):
// creates of one client race on replicas over one etcd. The limits hold
// exactly, on one replica and across three (the store counts in the
// creates' transactions); every create refused is ResourceExhausted.
func TestTargetLimitsUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	const creates = 48
	cases := []struct {
		name     string
		replicas int
		limit    int
		set      func(*engine.Options)
	}{
		{"per client, one replica", 1, 5, func(o *engine.Options) { o.MaxTargetsPerClient = 5 }},
		{"total, one replica", 1, 7, func(o *engine.Options) { o.MaxTargets = 7 }},
		{"per client, three replicas", 3, 5, func(o *engine.Options) { o.MaxTargetsPerClient = 5 }},
		{"total, three replicas", 3, 7, func(o *engine.Options) { o.MaxTargets = 7 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := etcdtest.Start(t)
			replicas := make([]*replica, tc.replicas)
			var store *etcd.Store
			for i := range replicas {
				store = open(t, c.Client(t), etcd.Options{ReplicaID: strconv.Itoa(i)})
				replicas[i] = startReplica(t, store, tc.set)
			}
			ctx := engine.WithClient(t.Context(), "alice")
			var created atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range creates {
				r := replicas[i%len(replicas)]
				wg.Go(func() {
					<-start
					_, err := r.eng.Create(ctx, &target.Spec{Name: "t-" + strconv.Itoa(i)})
					switch {
					case err == nil:
						created.Add(1)
					case !errors.Is(err, engine.ErrResourceExhausted):
						t.Errorf("Create t-%d: %v, want nil or ErrResourceExhausted", i, err)
					}
				})
			}
			close(start)
			wg.Wait()
			st, err := store.Load(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			n := int(created.Load())
			if len(st.Targets) != n {
				t.Errorf("etcd holds %d targets, %d creates succeeded", len(st.Targets), n)
			}
			if n != tc.limit {
				t.Errorf("%d of %d creates on %d replicas succeeded, want exactly the limit %d", n, creates, tc.replicas, tc.limit)
			}
		})
	}
}

// TestApplyTargetLimits: an Apply over etcd whose creates would pass a
// limit fails with ResourceExhausted before anything is written, as over
// bbolt (it used to bypass the limits).
func TestApplyTargetLimits(t *testing.T) {
	t.Parallel()
	store := open(t, etcdtest.Start(t).Client(t), etcd.Options{ReplicaID: "a"})
	r := startReplica(t, store, func(o *engine.Options) { o.MaxTargetsPerClient = 5 })
	ctx := engine.WithClient(t.Context(), "alice")
	specs := func(prefix string, n int) []*target.Spec {
		s := make([]*target.Spec, n)
		for i := range s {
			s[i] = &target.Spec{Name: prefix + strconv.Itoa(i)}
		}
		return s
	}
	if _, err := r.eng.Apply(ctx, engine.ApplySet{Owner: "first", Targets: specs("a-", 3)}); err != nil {
		t.Fatalf("Apply of 3 targets under a limit of 5: %v", err)
	}
	if _, err := r.eng.Apply(ctx, engine.ApplySet{Owner: "second", Targets: specs("b-", 3)}); !errors.Is(err, engine.ErrResourceExhausted) {
		t.Errorf("Apply of 3 more targets = %v, want ErrResourceExhausted", err)
	}
	st, err := store.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Targets) != 3 {
		t.Errorf("etcd holds %d targets, want 3", len(st.Targets))
	}
}
