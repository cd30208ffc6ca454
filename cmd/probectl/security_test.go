package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/testpki"
	"github.com/probed/probed/server/auth"
)

const secretToken = "probectl-0123456789abcdef"

// TestFlagsAgainstMutualTLSAndTokens runs probectl's --ca, --cert, --key
// and --token-file against a probed that requires TLS, a client
// certificate and a token.
func TestFlagsAgainstMutualTLSAndTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, clients := testpki.NewCA(t, "ca"), testpki.NewCA(t, "clients")
	caFile := ca.WriteCA(t, dir, "ca.pem")
	certFile, keyFile := ca.Server(t, "probed").Write(t, dir, "server")
	certs, err := auth.LoadCerts(certFile, keyFile, clients.WriteCA(t, dir, "clients.pem"))
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.LoadTokens(testpki.WriteFile(t, dir, "tokens", []byte(secretToken+" ops\n")))
	if err != nil {
		t.Fatal(err)
	}
	a := auth.New(auth.Options{Tokens: tokens, ClientCerts: true})
	s := probedtest.Start(t, probedtest.Options{
		GRPC: append([]grpc.ServerOption{grpc.Creds(credentials.NewTLS(certs.TLSConfig()))}, a.ServerOptions()...),
	})
	clientCert, clientKey := clients.Client(t, "ops-laptop").Write(t, dir, "client")
	tokenFile := testpki.WriteFile(t, dir, "token", []byte(secretToken+"\n"))
	spec := writeFile(t, "web.yaml", "name: web\nlabels: {app: web}\n")

	creds := []string{"--ca", caFile, "--cert", clientCert, "--key", clientKey, "--token-file", tokenFile}
	ctx := t.Context()
	if r := probectl(ctx, s.Addr, "", append(creds, "apply", "-f", spec)...); r.code != 0 || r.out != "target/web created\n" {
		t.Fatalf("apply: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	if r := probectl(ctx, s.Addr, "", append(creds, "list")...); r.code != 0 || !strings.Contains(r.out, "web") {
		t.Fatalf("list: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	if r := probectl(ctx, s.Addr, "", append(creds, "get", "web", "-o", "json")...); r.code != 0 || !strings.Contains(r.out, `"name": "web"`) {
		t.Fatalf("get: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}

	// The same settings as a context of probectl's configuration file,
	// its paths relative to the file.
	config := testpki.WriteFile(t, dir, "probectl.yaml", []byte(`current-context: secure
contexts:
  - name: secure
    addr: `+s.Addr+`
    ca: ca.pem
    cert: `+filepath.Base(clientCert)+`
    key: `+filepath.Base(clientKey)+`
    token-file: token
  - name: plain
    addr: `+s.Addr+`
`))
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string // "": success
	}{
		{name: "current context", args: []string{"--config", config, "get", "web"}},
		{name: "named context", args: []string{"--config", config, "--context", "secure", "get", "web"}},
		{name: "flags override the context", args: []string{"--config", config, "--token-file", writeFile(t, "bad", "not-the-token-0123456789\n"), "get", "web"}, wantErr: "invalid bearer token"},
		{name: "context without credentials", args: []string{"--config", config, "--context", "plain", "get", "web"}, wantErr: "Error:"},
		{name: "unknown context", args: []string{"--config", config, "--context", "prod", "get", "web"}, wantErr: `--context "prod": no such context in ` + config + ` (secure, plain)`},
		{name: "missing file", args: []string{"--config", filepath.Join(dir, "nope.yaml"), "get", "web"}, wantErr: "nope.yaml: no such file"},
	} {
		var out, errOut bytes.Buffer
		code := run(ctx, tt.args, strings.NewReader(""), &out, &errOut)
		if tt.wantErr == "" && (code != 0 || !strings.Contains(out.String(), "web")) {
			t.Errorf("%s: code %d, stdout %q, stderr %q; want the target", tt.name, code, out.String(), errOut.String())
		}
		if tt.wantErr != "" && (code == 0 || !strings.Contains(errOut.String(), tt.wantErr)) {
			t.Errorf("%s: code %d, stderr %q; want a failure mentioning %q", tt.name, code, errOut.String(), tt.wantErr)
		}
	}

	refused := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "no token", args: []string{"--ca", caFile, "--cert", clientCert, "--key", clientKey}, wantErr: "missing credentials"},
		{name: "wrong token", args: []string{"--ca", caFile, "--cert", clientCert, "--key", clientKey, "--token-file", writeFile(t, "bad", "not-the-token-0123456789\n")}, wantErr: "invalid bearer token"},
		{name: "no client certificate", args: []string{"--ca", caFile, "--token-file", tokenFile}, wantErr: ""},
		{name: "plaintext", args: []string{"--token-file", tokenFile}, wantErr: ""},
	}
	for _, tt := range refused {
		r := probectl(ctx, s.Addr, "", append(tt.args, "get", "web")...)
		if r.code == 0 || !strings.Contains(r.err, tt.wantErr) {
			t.Errorf("%s: code %d, stderr %q; want a failure mentioning %q", tt.name, r.code, r.err, tt.wantErr)
		}
	}
}

func TestCellHidesControlCharacters(t *testing.T) {
	t.Parallel()
	if got, want := cell("ok \x1b[2J\x1b]0;pwned\x07 done\x00", maxMessage), "ok \uFFFD[2J\uFFFD]0;pwned\uFFFD done\uFFFD"; got != want {
		t.Errorf("cell = %q, want %q", got, want)
	}
}
