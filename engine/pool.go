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
// HTTP client's call depth on every probe.
type pool struct {
	exec    func(job)
	work    chan job // unbuffered: a send succeeds only to a waiting worker
	maxIdle int32
	idle    atomic.Int32

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

func newPool(maxIdle int, exec func(job)) *pool {
	return &pool{exec: exec, work: make(chan job), maxIdle: int32(maxIdle), stop: make(chan struct{})}
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
			p.idle.Add(-1)
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
