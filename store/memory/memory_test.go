package memory_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/store/memory"
	"github.com/probed/probed/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestContract(t *testing.T) {
	for _, tc := range []struct {
		name string
		step uint64
	}{
		{"Contiguous", 1},
		{"Step3", 3}, // strictly increasing, not contiguous
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Opener {
				s := memory.New(tc.step)
				// A closed memory store keeps its data; Reopen is the
				// restart.
				return func() engine.Store {
					s.Reopen()
					return s
				}
			})
		})
	}
}
