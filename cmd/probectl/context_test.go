package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestContextPrecedence: flags, then the context named by --context, then
// PROBED_ADDR, then the file's current-context, then the defaults.
func TestContextPrecedence(t *testing.T) { // not parallel: sets PROBED_ADDR
	dir := t.TempDir()
	config := filepath.Join(dir, "probectl.yaml")
	if err := os.WriteFile(config, []byte(`current-context: a
contexts:
  - {name: a, addr: "a:1", token-file: a-token}
  - {name: b, addr: "b:1", ca: /etc/b-ca.pem}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		env       string // PROBED_ADDR
		args      []string
		wantAddr  string
		wantToken string
		wantCA    string
		wantErr   string
	}{
		{name: "current context", wantAddr: "a:1", wantToken: filepath.Join(dir, "a-token")},
		{name: "named context", args: []string{"--context", "b"}, wantAddr: "b:1", wantCA: "/etc/b-ca.pem"},
		{name: "flag over context", args: []string{"--context", "b", "--addr", "c:1"}, wantAddr: "c:1", wantCA: "/etc/b-ca.pem"},
		{name: "PROBED_ADDR over current context", env: "e:1", wantAddr: "e:1", wantToken: filepath.Join(dir, "a-token")},
		{name: "named context over PROBED_ADDR", env: "e:1", args: []string{"--context", "b"}, wantAddr: "b:1", wantCA: "/etc/b-ca.pem"},
		{name: "unknown context", args: []string{"--context", "z"}, wantErr: `no such context`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PROBED_ADDR", tt.env)
			o := &rootOptions{addr: defaultAddr, configFile: config}
			if tt.env != "" {
				o.addr = tt.env // as newRootCommand defaults it
			}
			cmd := &cobra.Command{}
			f := cmd.Flags()
			f.StringVar(&o.addr, "addr", o.addr, "")
			f.StringVar(&o.caFile, "ca", "", "")
			f.StringVar(&o.certFile, "cert", "", "")
			f.StringVar(&o.keyFile, "key", "", "")
			f.StringVar(&o.tokenFile, "token-file", "", "")
			f.StringVar(&o.context, "context", "", "")
			if err := f.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := o.applyContext(cmd)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("applyContext = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.addr != tt.wantAddr || o.tokenFile != tt.wantToken || o.caFile != tt.wantCA {
				t.Errorf("addr %q, token-file %q, ca %q; want %q, %q, %q", o.addr, o.tokenFile, o.caFile, tt.wantAddr, tt.wantToken, tt.wantCA)
			}
		})
	}
}

// TestContextFileErrors: a bad file is an error naming it and the problem.
func TestContextFileErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, content, wantErr string }{
		{"unknown key", "contexts: [{name: a, adr: x}]", `unknown field "adr"`},
		{"no name", "contexts: [{addr: x}]", "contexts[0] has no name"},
		{"twice", "contexts: [{name: a}, {name: a}]", `context "a" is defined twice`},
		{"current context missing", "current-context: b\ncontexts: [{name: a}]", `current-context "b" is not among the contexts (a)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, "probectl.yaml", tt.content)
			if _, err := readContextFile(path, true); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("readContextFile = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
	if f, err := readContextFile(filepath.Join(t.TempDir(), "none.yaml"), false); err != nil || len(f.Contexts) != 0 {
		t.Errorf("a default file that does not exist: %v, %v; want no contexts, no error", f, err)
	}
}
