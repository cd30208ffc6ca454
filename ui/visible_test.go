package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/ui"
)

// byNamespace is a page whose caller (the X-Identity header, as auth.HTTP
// would set it) reads the targets of its namespace only: NAME/...
func byNamespace() pageOptions {
	return pageOptions{
		protect: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(w, r.WithContext(engine.WithClient(r.Context(), r.Header.Get("X-Identity"))))
			})
		},
		visible: func(ctx context.Context) func(string) bool {
			prefix := engine.ClientFrom(ctx) + "/"
			return func(name string) bool { return strings.HasPrefix(name, prefix) }
		},
	}
}

// TestVisible: with Options.Visible (probed --authz-policy), a caller
// gets only the targets it may read: another's target and its events are
// 404, as a target that does not exist; its own (a namespaced name, '/'
// escaped in the URL) are served.
func TestVisible(t *testing.T) {
	t.Parallel()
	p := newPage(t, byNamespace())
	p.create(t, &target.Spec{Name: "team-a/web"})
	p.create(t, &target.Spec{Name: "team-b/web"})
	as := http.Header{"X-Identity": {"team-a"}}
	for _, c := range []struct {
		path string
		want int
	}{
		{"/api/targets/team-a%2Fweb", http.StatusOK},
		{"/api/targets/team-a%2Fweb/events", http.StatusOK},
		{"/api/targets/team-b%2Fweb", http.StatusNotFound},
		{"/api/targets/team-b%2Fweb/events", http.StatusNotFound},
	} {
		if code, _, body := p.get(t, c.path, as); code != c.want {
			t.Errorf("GET %s as team-a: %d %s, want %d", c.path, code, body, c.want)
		}
	}
}

// The live figures (stats messages) of a stream have only the targets its
// caller may read: in the first message (every target's figures) and in
// the refreshes after it (what changed).
func TestVisibleStats(t *testing.T) {
	t.Parallel()
	p := newPage(t, byNamespace())
	port := probedtest.Accepting(t)
	names := []string{"team-a/web", "team-b/web"}
	trigger := func() {
		t.Helper()
		for _, name := range names {
			if _, _, err := p.eng.Trigger(t.Context(), name, probe.Readiness); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range names {
		spec := tcpTarget(name, port)
		spec.Labels = nil // a name with '/' is no label value
		p.create(t, spec)
	}
	trigger()
	s := p.openStream(t, http.Header{"X-Identity": {"team-a"}}, "")
	readSnapshot(t, s, "new stream")
	wantStats(t, s, map[string]uint64{"team-a/web": 1})

	trigger()
	p.clock.Advance(ui.DefaultStatsInterval)
	wantStats(t, s, map[string]uint64{"team-a/web": 2})
}
