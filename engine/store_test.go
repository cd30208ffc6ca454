package engine_test

import (
	"strings"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

// Change.Check is the one definition of a change no Store can write,
// which every store applies before it writes anything.
func TestChangeCheck(t *testing.T) {
	t.Parallel()
	web := func() *engine.Target { return &engine.Target{Spec: &target.Spec{Name: "web"}} }
	tests := []struct {
		name   string
		change *engine.Change
		want   string // in the error; "" when writable
	}{
		{"status change", &engine.Change{Name: "web", Target: web()}, ""},
		{"create", &engine.Change{Name: "web", Target: web(), SpecChanged: true, Create: true}, ""},
		{"delete without a target", &engine.Change{Name: "web", Delete: true}, ""},
		{"no name", &engine.Change{Target: web()}, "no target name"},
		{"no target", &engine.Change{Name: "web"}, "no Target"},
		{"no spec", &engine.Change{Name: "web", Target: &engine.Target{}}, "no Spec"},
		{"spec of another target", &engine.Change{Name: "db", Target: web(), SpecChanged: true}, `spec is named "web"`},
		{"create without its spec", &engine.Change{Name: "web", Target: web(), Create: true}, "a create without its spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.change.Check()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check() = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
