package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the tests leave no goroutine behind: a Watch's
// policy watcher, an ApplyTargets call's receiver.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
