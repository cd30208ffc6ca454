package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/probed/probed/engine"
)

// logged appends a batch of n changes with the revisions after *rev.
func logged(l *engine.CommitLog, rev *uint64, n int) {
	changes := make([]*engine.Change, n)
	for i := range changes {
		*rev++
		changes[i] = &engine.Change{Name: fmt.Sprintf("t-%d", *rev)}
		changes[i].SetRevision(*rev)
	}
	l.Append(changes)
}

// followOnce follows l from after and returns what it delivered before
// it had nothing more (or the error it returned).
func followOnce(l *engine.CommitLog, after uint64) ([]uint64, error) {
	ctx, cancel := context.WithCancel(context.Background())
	var positions []uint64
	err := l.Follow(ctx, after, func(d engine.Delivery) {
		positions = append(positions, d.Pos)
		cancel() // the log delivers what it holds, then sees ctx done
	})
	return positions, err
}

func TestCommitLog(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, l *engine.CommitLog)
	}{
		{"NothingKeptBeforeStart", func(t *testing.T, l *engine.CommitLog) {
			var rev uint64
			logged(l, &rev, 1)
			l.Start()
			logged(l, &rev, 2)
			got, err := followOnce(l, 0)
			if err != nil || len(got) != 1 || got[0] != 3 {
				t.Errorf("Follow delivered positions %v (%v), want [3]: a batch appended before Start is nobody's", got, err)
			}
		}},
		{"InOrderFromAfter", func(t *testing.T, l *engine.CommitLog) {
			l.Start()
			var rev uint64
			logged(l, &rev, 2)
			logged(l, &rev, 1)
			logged(l, &rev, 3)
			got, err := followOnce(l, 2)
			if err != nil || fmt.Sprint(got) != "[3 6]" {
				t.Errorf("Follow(2) delivered positions %v (%v), want [3 6]", got, err)
			}
		}},
		{"DroppedUndeliveredIsCompacted", func(t *testing.T, l *engine.CommitLog) {
			l.Start()
			var rev uint64
			for range 3 {
				logged(l, &rev, 1<<15) // the log keeps at most 1<<16 changes
			}
			_, err := followOnce(l, 0)
			if !errors.Is(err, engine.ErrCompacted) {
				t.Errorf("Follow(0) after the oldest batch was dropped = %v, want ErrCompacted", err)
			}
			got, err := followOnce(l, 1<<15)
			if err != nil || fmt.Sprint(got) != fmt.Sprint([]uint64{2 << 15, 3 << 15}) {
				t.Errorf("Follow from the dropped batch delivered %v (%v), want the two kept", got, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, &engine.CommitLog{}) })
	}
}
