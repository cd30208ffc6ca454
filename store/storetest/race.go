package storetest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

// RacingCreates creates name twice at once, through create (an engine's
// Create, say), with the label "by" telling the creates apart, and returns
// the index (0 or 1) of the one that succeeded. It fails t unless exactly
// one did and the other was refused with engine.ErrAlreadyExists.
func RacingCreates(t testing.TB, name string, create func(*target.Spec) error) int {
	t.Helper()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for j := range errs {
		wg.Go(func() {
			errs[j] = create(&target.Spec{Name: name, Labels: map[string]string{"by": strconv.Itoa(j)}})
		})
	}
	wg.Wait()
	winner := -1
	for j, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("%s: both creates succeeded", name)
		case err == nil:
			winner = j
		case !errors.Is(err, engine.ErrAlreadyExists):
			t.Fatalf("%s: create %d: %v, want ErrAlreadyExists", name, j, err)
		}
	}
	if winner < 0 {
		t.Fatalf("%s: no create succeeded: %v", name, errs)
	}
	return winner
}

// Creator adapts an engine's Create for RacingCreates.
func Creator(ctx context.Context, e *engine.Engine) func(*target.Spec) error {
	return func(s *target.Spec) error {
		_, err := e.Create(ctx, s)
		return err
	}
}
