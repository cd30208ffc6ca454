package hostguard_test

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/probed/probed/server/hostguard"
)

func TestGuard(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	g := hostguard.New([]string{"127.0.0.1:8080", "probed.internal:9464", ":9000"}, []string{"Status.Example.COM."})
	tests := []struct {
		name   string
		host   string
		origin string
		tls    bool
		want   int
	}{
		{name: "IPv4 address", host: "127.0.0.1:8080", want: http.StatusNoContent},
		{name: "IPv6 address", host: "[::1]:8080", want: http.StatusNoContent},
		{name: "another IP address", host: "10.1.2.3", want: http.StatusNoContent},
		{name: "localhost", host: "localhost:8080", want: http.StatusNoContent},
		{name: "a .localhost name", host: "app.localhost:8080", want: http.StatusNoContent},
		{name: "the listen address's name", host: "PROBED.internal:9464", want: http.StatusNoContent},
		{name: "an allowed name", host: "status.example.com", want: http.StatusNoContent},
		{name: "a rebound name", host: "attacker.example:8080", want: http.StatusForbidden},
		{name: "a name ending like localhost", host: "evil-localhost:8080", want: http.StatusForbidden},
		{name: "no host", host: "", want: http.StatusForbidden},
		{name: "same origin", host: "127.0.0.1:8080", origin: "http://127.0.0.1:8080", want: http.StatusNoContent},
		{name: "same origin, default port", host: "status.example.com", origin: "http://status.example.com:80", want: http.StatusNoContent},
		{name: "same origin over TLS", host: "status.example.com", origin: "https://status.example.com", tls: true, want: http.StatusNoContent},
		{name: "another scheme", host: "127.0.0.1:8080", origin: "https://127.0.0.1:8080", want: http.StatusForbidden},
		{name: "another site", host: "127.0.0.1:8080", origin: "http://attacker.example", want: http.StatusForbidden},
		{name: "another port", host: "127.0.0.1:8080", origin: "http://127.0.0.1:8081", want: http.StatusForbidden},
		{name: "a null origin", host: "127.0.0.1:8080", origin: "null", want: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/api/events", nil)
			r.Host = tt.host
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			g.Wrap(ok).ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Errorf("Host %q, Origin %q: %d %s, want %d", tt.host, tt.origin, w.Code, w.Body, tt.want)
			}
		})
	}
}

func TestGuardAnyHost(t *testing.T) {
	t.Parallel()
	if !hostguard.New(nil, []string{"*"}).HostAllowed("anything.example") {
		t.Error(`"*" does not allow every host`)
	}
}
