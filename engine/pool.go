package engine

import (
	"sync"
	"sync/atomic"
)

// pool runs probe executions on reused goroutines: a run goes to an idle
// worker when there is one, else to a new worker, so a hanging target never
// holds up another's run; a worker that finds maxIdle others idle exits, so
// a burst of hanging probes does not leave thousands of goroutines behind.
// Reuse matters for cost: a fresh goroutine grows its stack through the
// HTTP client's call depth on every probe. Workers a burst left idle and
// that no run needed since are retired by trim, down to keepIdle.
type pool struct {
	exec     func(job)
	work     chan job // unbuffered: a send succeeds only to a waiting worker
	maxIdle  int32
	keepIdle int32 // trim leaves this many idle workers
	idle     atomic.Int32
	// low is the fewest workers idle since the last trim: that many were
	// not needed by any run in the meantime.
	low    atomic.Int32
	retire chan struct{} // unbuffered: a send ends one idle worker

	mu      sync.RWMutex // held for reading while spawning, for writing by close
	stopped bool         // guarded by mu
	stop    chan struct{}
	workers sync.WaitGroup
}

// job is one run of a probe.
type job struct {
	r   *runner
	gen uint64
}

func newPool(maxIdle, keepIdle int, exec func(job)) *pool {
	return &pool{
		exec: exec, work: make(chan job), maxIdle: int32(maxIdle), keepIdle: int32(keepIdle),
		retire: make(chan struct{}), stop: make(chan struct{}),
	}
}

// trim ends the idle workers beyond keepIdle that stayed idle since the
// previous trim (none was needed by a run), and starts the next period.
// Called periodically, it lets goroutines follow the probes in flight
// back down after a burst.
func (p *pool) trim() {
	defer func() { p.low.Store(p.idle.Load()) }()
	for surplus := p.low.Load() - p.keepIdle; surplus > 0; surplus-- {
		select {
		case p.retire <- struct{}{}:
			p.idle.Add(-1) // here, so that the next period starts from the right count
		default:
			return // fewer idle now: they are working
		}
	}
}

// taken records that an idle worker took a run.
func (p *pool) taken() {
	n := p.idle.Add(-1)
	for {
		low := p.low.Load()
		if n >= low || p.low.CompareAndSwap(low, n) {
			return
		}
	}
}

// submit runs j on a worker; it reports false, running nothing, once the
// pool is closed.
func (p *pool) submit(j job) bool {
	select {
	case p.work <- j:
		return true
	default:
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.stopped {
		return false
	}
	p.workers.Add(1)
	go p.worker(j)
	return true
}

func (p *pool) worker(j job) {
	defer p.workers.Done()
	for {
		p.exec(j)
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		select {
		case j = <-p.work:
			p.taken()
		case <-p.retire: // trim counted it
			return
		case <-p.stop:
			p.idle.Add(-1)
			return
		}
	}
}

// close stops the idle workers and waits for every worker to return; the
// caller makes sure no run is still in progress or submitted.
func (p *pool) close() {
	p.mu.Lock()
	p.stopped = true
	close(p.stop)
	p.mu.Unlock()
	p.workers.Wait()
}
