package engine_test

import (
	"context"
	"strings"
	"testing"
	"unsafe"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

// TestTargetsShareTheirClient: the targets of one client identity hold
// one string of it, not a copy of their request's each, also after a
// restart (the store decodes one per target).
func TestTargetsShareTheirClient(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, name := range []string{"a", "b"} {
		ctx := engine.WithClient(context.Background(), strings.Clone("alice@127.0.0.1"))
		if _, err := h.eng.Create(ctx, &target.Spec{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	shared := func(when string) {
		t.Helper()
		a, b := h.get("a").Status.Client, h.get("b").Status.Client
		if a != "alice@127.0.0.1" || unsafe.StringData(a) != unsafe.StringData(b) {
			t.Errorf("%s: clients %q at %p and %q at %p; want one string", when, a, unsafe.StringData(a), b, unsafe.StringData(b))
		}
	}
	shared("created")
	h.restart()
	shared("restarted")
}
