package ui_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

func TestPageIsEmbeddedAndReadOnly(t *testing.T) {
	t.Parallel()
	p := newPage(t, pageOptions{})
	code, h, body := p.get(t, "/", nil)
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !bytes.Contains(body, []byte(`src="app.js"`)) {
		t.Fatalf("GET /: %d %s", code, h.Get("Content-Type"))
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("Content-Security-Policy %q: the page must load nothing from elsewhere", csp)
	}
	for path, ctype := range map[string]string{"/app.js": "text/javascript", "/app.css": "text/css", "/favicon.svg": "image/svg+xml"} {
		code, h, body := p.get(t, path, nil)
		if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("GET %s: %d %q, want %s", path, code, h.Get("Content-Type"), ctype)
		}
		if code, _, _ := p.get(t, path, http.Header{"If-None-Match": {h.Get("ETag")}}); code != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", path, code)
		}
	}
	// Nothing refers to another origin: the page works offline.
	for _, path := range []string{"/", "/app.js", "/app.css"} {
		_, _, body := p.get(t, path, nil)
		if bytes.Contains(body, []byte("https://")) || bytes.Contains(body, []byte("http://")) {
			t.Errorf("%s refers to an external URL", path)
		}
	}
	if code, _, _ := p.get(t, "/nope", nil); code != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", code)
	}
	resp, err := http.Post(p.url+"/api/events", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/events: %s, want 405", resp.Status)
	}
}
