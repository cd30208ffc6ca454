package main

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/testpki"
)

// xdsCallCredsEnv turns on grpc-go's call_creds in the bootstrap (gRFC
// A97, experimental in grpc-go v1.85).
const xdsCallCredsEnv = "GRPC_EXPERIMENTAL_XDS_BOOTSTRAP_CALL_CREDS"

// xdsPolicy lets admin do everything and reader read the targets under
// ns/ only.
const xdsPolicy = `rules:
  - identities: [admin]
    names: [""]
    verbs: [read, write, operate]
  - identities: [reader]
    names: ["ns/"]
    verbs: [read]
`

// fakeJWT is a JWT as grpc-go's jwt_token_file call credentials read it
// (three base64url parts, an exp claim in the future); its signature is
// not one: probed takes it as an opaque token.
func fakeJWT(sub string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
		enc(fmt.Appendf(nil, `{"sub":%q,"exp":%d}`, sub, exp.Unix())) + "." + enc([]byte("not-signed"))
}

// TestXDSClientCredentials runs a real grpc-go xds:/// client with each
// of the bootstrap credentials the README names against a probed with
// TLS, authentication and --authz-policy (the identity "reader" may read
// the targets under ns/):
//   - mutual TLS: the client certificate's CN is the identity; the client
//     is served;
//   - a token as gRFC A97 JWT call credentials (jwt_token_file) over TLS,
//     with GRPC_EXPERIMENTAL_XDS_BOOTSTRAP_CALL_CREDS=true: served;
//   - the same bootstrap without that variable: grpc-go sends no token,
//     probed refuses the stream, every RPC fails (UNAVAILABLE) and the
//     client never holds a resource.
func TestXDSClientCredentials(t *testing.T) {
	bin := buildProbed(t)
	p := newPKI(t)
	policy := testpki.WriteFile(t, p.dir, "policy.yaml", []byte(xdsPolicy))
	b := startGRPCBackends(t, 1)
	caCreds := fmt.Sprintf(`[{"type": "tls", "config": {"ca_certificate_file": %q}}]`, p.caFile)

	t.Run("mutual TLS", func(t *testing.T) {
		px := startXDSProbed(t, bin, t.TempDir(), p.tlsArgs("--client-ca", p.clientCAFile, "--authz-policy", policy)...)
		adminCert, adminKey := p.client(t, p.clients, "admin")
		admin := dialClient(t, px.addr(), client.WithTLS(p.caFile), client.WithClientCert(adminCert, adminKey))
		if _, err := admin.Create(callCtx(t), b.target("ns", "svc", 0, 50*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		readerCert, readerKey := p.client(t, p.clients, "reader")
		creds := fmt.Sprintf(`[{"type": "tls", "config": {"ca_certificate_file": %q, "certificate_file": %q, "private_key_file": %q}}]`,
			p.caFile, readerCert, readerKey)
		x := startXDSClientWith(t, xdsBootstrap(px.xdsAddr, creds, ""), "xds:///svc.ns", 50)
		start := time.Now()
		x.waitServed(t, start, "b0")
		x.stop(t)
		if f := x.failed(start); len(f) > 0 {
			t.Errorf("%d RPCs failed, first %+v", len(f), f[0])
		}
		x.checkXDSStates(t)
	})

	reader := fakeJWT("reader", time.Now().Add(time.Hour))
	tokens := tokenFile(t, "admin-token-0123456789 admin", reader+" reader")
	jwtFile := testpki.WriteFile(t, t.TempDir(), "xds.jwt", []byte(reader+"\n"))
	callCreds := fmt.Sprintf(`[{"type": "jwt_token_file", "config": {"jwt_token_file": %q}}]`, jwtFile)
	px := startXDSProbed(t, bin, t.TempDir(), p.tlsArgs("--auth-token-file", tokens, "--authz-policy", policy)...)
	admin := dialClient(t, px.addr(), client.WithTLS(p.caFile), client.WithToken("admin-token-0123456789"))
	if _, err := admin.Create(callCtx(t), b.target("ns", "svc", 0, 50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}

	t.Run("token as JWT call credentials", func(t *testing.T) {
		x := startXDSClientWith(t, xdsBootstrap(px.xdsAddr, caCreds, callCreds), "xds:///svc.ns", 50, xdsCallCredsEnv+"=true")
		start := time.Now()
		x.waitServed(t, start, "b0")
		x.stop(t)
		if f := x.failed(start); len(f) > 0 {
			t.Errorf("%d RPCs failed, first %+v", len(f), f[0])
		}
		x.checkXDSStates(t)
	})

	t.Run("call credentials without the experimental variable", func(t *testing.T) {
		x := startXDSClientWith(t, xdsBootstrap(px.xdsAddr, caCreds, callCreds), "xds:///svc.ns", 50, xdsCallCredsEnv+"=false")
		start := time.Now()
		poll.UntilMet(t, "20 RPCs failed", time.Minute, func() string {
			if n := len(x.failed(start)); n < 20 {
				return fmt.Sprintf("%d failed", n)
			}
			return ""
		})
		x.stop(t)
		for _, r := range x.since(start) {
			if r.code != codes.Unavailable {
				t.Fatalf("an RPC ended with %v (by %s), want every one UNAVAILABLE", r.code, r.backend)
			}
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		for _, s := range x.states {
			if s.version != "-" {
				t.Errorf("the client holds %s %s at version %s without credentials", s.typ, s.name, s.version)
			}
		}
	})
}
