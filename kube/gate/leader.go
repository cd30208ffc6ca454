package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Election configures leader election on a Lease.
type Election struct {
	// Namespace and Name of the Lease.
	Namespace, Name string
	// Identity of this replica (its pod name); must differ between
	// replicas.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod as client-go's
	// leaderelection has them; defaults 15 s, 10 s, 2 s. A replica that
	// stops cleanly releases the Lease, so another takes over within
	// RetryPeriod; one that dies is replaced after LeaseDuration.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnLeading is called with true when this replica starts leading and
	// false when it stops; optional.
	OnLeading func(bool)
}

// ErrLeadershipLost is returned by RunElected when this replica lost the
// Lease while leading.
var ErrLeadershipLost = errors.New("leadership lost")

// RunElected runs run while this replica holds the Lease: it waits to
// acquire it, runs run with a context cancelled when the Lease is lost or
// ctx ends, and releases the Lease when it returns. It returns nil when
// ctx ended, ErrLeadershipLost when the Lease was lost, and run's error
// otherwise.
func RunElected(ctx context.Context, kube kubernetes.Interface, e Election, run func(context.Context) error) error {
	if e.LeaseDuration == 0 {
		e.LeaseDuration, e.RenewDeadline, e.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// client-go starts OnStartedLeading in a goroutine of its own and does
	// not wait for it: it may start after le.Run has returned (the Lease
	// acquired as ctx ended). It runs run only while RunElected has not
	// finished, and RunElected waits for that run.
	var (
		mu       sync.Mutex
		running  sync.WaitGroup // run's call; Add under mu before finished
		finished bool           // RunElected no longer waits; guarded by mu
		runErr   error          // guarded by mu
		led      bool           // guarded by mu
	)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
		},
		LeaseDuration:   e.LeaseDuration,
		RenewDeadline:   e.RenewDeadline,
		RetryPeriod:     e.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				if finished {
					mu.Unlock()
					return
				}
				led = true
				running.Add(1)
				mu.Unlock()
				defer running.Done()
				if e.OnLeading != nil {
					e.OnLeading(true)
				}
				err := run(lctx)
				mu.Lock()
				runErr = err
				mu.Unlock()
				cancel() // run ended: give up the Lease
			},
			OnStoppedLeading: func() {
				if e.OnLeading != nil {
					e.OnLeading(false)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx) // returns once leadership is lost or ctx ends
	mu.Lock()
	finished = true
	leading := led
	mu.Unlock()
	running.Wait() // le.Run does not wait for OnStartedLeading
	mu.Lock()
	defer mu.Unlock()
	switch {
	case runErr != nil:
		return runErr
	case parent.Err() != nil || !leading:
		return nil
	}
	return ErrLeadershipLost
}
