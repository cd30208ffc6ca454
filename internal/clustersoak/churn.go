package clustersoak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// outcome is what a create or delete call answered.
type outcome int

const (
	acked     outcome = iota // OK: it must hold
	uncertain                // failed or timed out: applied or not
	notFound                 // a delete answered NotFound
)

// churnOp is one create or delete the churner sent.
type churnOp struct {
	create  bool
	outcome outcome
	via     string
	stored  string    // for a NotFound: what etcd held right after
	at      time.Time // when the call was sent
	took    time.Duration
	err     error
}

// churner creates and deletes churn targets through the replicas, one
// call at a time, and records what each call answered.
type churner struct {
	rng      *rand.Rand
	replicas func() []*replica
	spec     func(name string) *probev1.Target
	capacity int // churn targets alive at most
	// stored says whether etcd holds the target's spec now (a
	// linearizable read): asked when a delete answers NotFound.
	stored func(ctx context.Context, name string) string

	mu   sync.Mutex // guards ops
	ops  map[string][]churnOp
	next int
	live []string
}

func (c *churner) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.step(ctx)
	}
}

// step sends one call.
func (c *churner) step(ctx context.Context) {
	var up []*replica
	for _, r := range c.replicas() {
		if r.state() == running {
			up = append(up, r)
		}
	}
	if len(up) == 0 {
		return
	}
	r := up[c.rng.IntN(len(up))]
	svc := r.client()
	if svc == nil {
		return
	}
	create := len(c.live) < c.capacity && (len(c.live) == 0 || c.rng.IntN(3) > 0)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sent := time.Now()
	var (
		name string
		err  error
	)
	if create {
		name = fmt.Sprintf("c-%06d", c.next)
		c.next++
		c.live = append(c.live, name)
		_, err = svc.CreateTarget(cctx, &probev1.CreateTargetRequest{Target: c.spec(name)})
	} else {
		i := c.rng.IntN(len(c.live))
		name = c.live[i]
		c.live = slices.Delete(c.live, i, i+1)
		_, err = svc.DeleteTarget(cctx, &probev1.DeleteTargetRequest{Name: name})
	}
	if ctx.Err() != nil {
		err = ctx.Err() // the soak ended meanwhile: not an answer
	}
	op := churnOp{create: create, via: r.id, at: sent, took: time.Since(sent), err: err}
	switch {
	case err == nil:
		op.outcome = acked
	case !create && status.Code(err) == codes.NotFound:
		op.outcome = notFound
		if c.stored != nil {
			op.stored = c.stored(ctx, name)
		}
	default:
		op.outcome = uncertain
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ops == nil {
		c.ops = map[string][]churnOp{}
	}
	c.ops[name] = append(c.ops[name], op)
}

// churnResult sums the calls and what was lost.
type churnResult struct {
	Creates, Deletes       int // acknowledged
	Uncertain              int // failed or timed out
	Lost                   []string
	LostAt                 []time.Time // when each lost write's evidence came
	ExpectedAlive, Checked int
}

// expect says, for each name whose fate is certain, whether it must
// exist; and lists the deletes that found an acknowledged create gone.
func (c *churner) expect() (map[string]bool, churnResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[string]bool{}
	var res churnResult
	for name, ops := range c.ops {
		certain, alive := true, false
		var created churnOp
		for _, op := range ops {
			switch {
			case op.outcome == uncertain:
				res.Uncertain++
				certain = false
			case op.create:
				res.Creates++
				alive, created = true, op
			case op.outcome == notFound:
				if certain && alive {
					res.Lost = append(res.Lost, fmt.Sprintf("%s: created (acknowledged by %s at %s in %v), then DeleteTarget on %s at %s (%v later) answered NotFound (etcd right after: %s)",
						name, created.via, created.at.Format("15:04:05.000"), created.took.Round(time.Millisecond), op.via, op.at.Format("15:04:05.000"), op.at.Sub(created.at).Round(time.Millisecond), op.stored))
					res.LostAt = append(res.LostAt, op.at)
				}
				alive = false
			default:
				res.Deletes++
				alive = false
			}
		}
		if certain {
			want[name] = alive
			if alive {
				res.ExpectedAlive++
			}
		}
	}
	return want, res
}
