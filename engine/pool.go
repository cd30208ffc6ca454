package engine

import (
	"slices"
	"sync"
	"sync/atomic"
)

// pool runs probe executions on reused goroutines: a run goes to an idle
// worker when there is one, else to a new worker, so a hanging target never
// holds up another's run. Reuse matters for cost: a fresh goroutine grows
// its stack through the HTTP client's call depth on every probe. The idle
// workers kept are sized by demand (resize): keepIdle plus the most runs
// seen in flight over the last second, at most maxIdle; a worker that
// finds that many others idle exits, and resize retires the surplus, so
// goroutines follow the probes in flight back down within a second of a
// burst rather than staying at the burst's size.
type pool struct {
	exec     func(job)
	work     chan job // unbuffered: a send succeeds only to a waiting worker
	maxIdle  int32
	keepIdle int32 // resize never bounds idle workers below this
	idle     atomic.Int32
	// limit is the idle workers kept now (see resize); it starts at
	// maxIdle, until the first resize has seen the demand.
	limit  atomic.Int32
	retire chan struct{} // unbuffered: a send ends one idle worker

	// demand holds the runs in flight of the last resizeSamples calls of
	// resize, and next the slot of the next one; only resize's caller
	// uses them.
	demand [resizeSamples]int32
	next   int

	mu      sync.RWMutex // held for reading while spawning, for writing by close
	stopped bool         // guarded by mu
	stop    chan struct{}
	workers sync.WaitGroup
}

// resizeSamples is how many calls of resize make up the demand the pool
// is sized by: the executor calls it every resizeEvery, so the last
// second.
const resizeSamples = 4

// job is one run of a probe.
type job struct {
	r   *runner
	gen uint64
}

func newPool(maxIdle, keepIdle int, exec func(job)) *pool {
	p := &pool{
		exec: exec, work: make(chan job), maxIdle: int32(maxIdle), keepIdle: int32(min(keepIdle, maxIdle)),
		retire: make(chan struct{}), stop: make(chan struct{}),
	}
	p.limit.Store(p.maxIdle)
	return p
}

// resize records inflight, the runs in progress now, and sizes the idle
// workers by the demand of the last resizeSamples calls: keepIdle plus
// the most runs seen in flight, at most maxIdle. Idle workers beyond it
// are ended now (those about to be idle end by themselves). Called
// periodically from one goroutine.
func (p *pool) resize(inflight int64) {
	p.demand[p.next] = int32(min(inflight, int64(p.maxIdle)))
	p.next = (p.next + 1) % len(p.demand)
	limit := min(p.keepIdle+slices.Max(p.demand[:]), p.maxIdle)
	p.limit.Store(limit)
	for p.idle.Load() > limit {
		select {
		case p.retire <- struct{}{}:
			p.idle.Add(-1) // here, so that the loop sees the right count
		default:
			return // the idle ones are not waiting yet, or took work: next time
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
		if p.idle.Add(1) > p.limit.Load() {
			p.idle.Add(-1)
			return
		}
		select {
		case j = <-p.work:
			p.idle.Add(-1)
		case <-p.retire: // resize counted it
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
