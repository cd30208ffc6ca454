package ui_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/probed/probed/client"
	"github.com/probed/probed/engine/target"
)

// get returns the status and body of GET path.
func (p *page) get(t *testing.T, path string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func TestTargetIsWhatProbectlGetPrints(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{})
	p.create(t, tcpTarget("web", 8080))

	code, h, got := p.get(t, "/api/targets/web", nil)
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/targets/web: %d %s", code, h.Get("Content-Type"))
	}
	// `probectl get web -o json`: GetTarget over gRPC, protojson, printed
	// with encoding/json's indentation and a newline.
	tg, err := client.New(p.probed.Conn).Get(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := protojson.Marshal(tg)
	if err != nil {
		t.Fatal(err)
	}
	var compact, want bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("GET /api/targets/web:\n%s\nwant (probectl get web -o json):\n%s", got, want.Bytes())
	}

	if code, _, body := p.get(t, "/api/targets/nope", nil); code != http.StatusNotFound || !strings.Contains(string(body), "not found") {
		t.Fatalf("GET /api/targets/nope: %d %s, want 404", code, body)
	}
}

// TestTargetWithoutTargetJSON: without Options.TargetJSON the page serves
// its own view of the target.
func TestTargetWithoutTargetJSON(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{viewJSON: true})
	p.create(t, tcpTarget("web", 8080))
	code, h, body := p.get(t, "/api/targets/web", nil)
	var got targetJSON
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" || json.Unmarshal(body, &got) != nil {
		t.Fatalf("GET /api/targets/web: %d %s %s", code, h.Get("Content-Type"), body)
	}
	if got.Name != "web" || got.Phase != "active" || got.Probes["readiness"].PeriodMs == 0 {
		t.Errorf("GET /api/targets/web = %s, want the page's view of web", body)
	}
}

// TestPageLinksNoGRPC: the status page depends on the engine only; the
// API's JSON form comes in through Options.TargetJSON.
func TestPageLinksNoGRPC(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "google.golang.org/grpc") || pkg == "github.com/probed/probed/server" || strings.HasPrefix(pkg, "github.com/probed/probed/proto/") {
			t.Errorf("ui depends on %s", pkg)
		}
	}
}

func TestTargetEventsFromHistory(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{})
	p.create(t, &target.Spec{Name: "a"})
	p.create(t, &target.Spec{Name: "b"})
	var last uint64
	for i := range 120 {
		tg, err := p.eng.Update(t.Context(), &target.Spec{Name: "a", Labels: map[string]string{"v": fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		last = tg.Status.Revision
		if i == 2 {
			p.create(t, &target.Spec{Name: "c"})
		}
	}

	var got struct{ Events []eventJSON }
	code, _, body := p.get(t, "/api/targets/a/events", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /api/targets/a/events: %d %s", code, body)
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != 100 {
		t.Fatalf("%d events, want the last 100", len(got.Events))
	}
	for i, ev := range got.Events {
		if ev.Name != "a" || ev.Kind != "updated" || (i > 0 && ev.Rev <= got.Events[i-1].Rev) {
			t.Fatalf("event %d: %+v, want a's updates in revision order", i, ev)
		}
	}
	if end := got.Events[len(got.Events)-1]; end.Rev != last || end.Target.Labels["v"] != "119" {
		t.Fatalf("last event %+v, want the last update (revision %d)", end, last)
	}

	code, _, body = p.get(t, "/api/targets/b/events", nil)
	if err := json.Unmarshal(body, &got); err != nil || code != http.StatusOK || len(got.Events) != 1 || got.Events[0].Kind != "created" {
		t.Fatalf("GET /api/targets/b/events: %d %s, want b's creation", code, body)
	}
	code, _, body = p.get(t, "/api/targets/nope/events", nil)
	if code != http.StatusOK || strings.TrimSpace(string(body)) != `{"events":[]}` {
		t.Fatalf("GET /api/targets/nope/events: %d %s, want no events", code, body)
	}
}

func TestProtectRejectsEverything(t *testing.T) {
	t.Parallel()
	// As the API's authentication does: 401 without a valid token.
	protect := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="probed"`)
				http.Error(w, "unauthenticated", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	p := newPage(t, pageOptions{protect: protect})
	p.create(t, &target.Spec{Name: "a"})
	for _, path := range []string{"/", "/app.js", "/api/events", "/api/targets/a", "/api/targets/a/events"} {
		code, h, _ := p.get(t, path, nil)
		if code != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s without credentials: %d, want 401 with WWW-Authenticate", path, code)
		}
	}
	if n := p.eng.Stats().Watchers; n != 0 {
		t.Fatalf("%d watchers open after refused requests", n)
	}
	// With credentials the stream works through the wrapper (it flushes).
	s := p.openStream(t, http.Header{"Authorization": {"Bearer s3cret"}}, "")
	targets, _ := readSnapshot(t, s, "new stream")
	if len(targets) != 1 {
		t.Fatalf("snapshot %v, want a", targets)
	}
}
