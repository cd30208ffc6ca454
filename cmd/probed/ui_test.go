package main

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/probed/probed/internal/refused"
)

func TestUIAddrFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value, wantErr string
	}{
		{name: "off by default"},
		{name: "loopback", value: "127.0.0.1:8080"},
		{name: "no port", value: "127.0.0.1", wantErr: `--ui-addr "127.0.0.1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var args []string
			if tt.value != "" {
				args = []string{"--ui-addr", tt.value}
			}
			cfg, err := parseFlags(args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseFlags(%v) error = %v, want %q", args, err, tt.wantErr)
				}
				return
			}
			if err != nil || cfg.ui.addr != tt.value {
				t.Fatalf("parseFlags(%v) = %+v, %v", args, cfg, err)
			}
		})
	}
}

func TestStatusPageServed(t *testing.T) {
	addr := refused.Reserve(t).Addr()
	startServer(t, testConfig(t, "--ui-addr", addr))

	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "probed") {
		t.Fatalf("GET /: %s", resp.Status)
	}

	// The event stream is open when probed stops: it ends, and so does
	// probed (startServer's cleanup checks serve's error).
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "retry: 1000\n" {
		t.Fatalf("first line of /api/events: %q, %v", line, err)
	}
}
