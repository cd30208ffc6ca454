package auth_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/engine"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server/auth"
)

const testPolicy = `rules:
  - identities: [team-a-ci]
    names: ["team-a/"]
    verbs: [read, write, operate]
  - identities: ["*"]
    names: [""]
    verbs: [read]
`

func writePolicy(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestPolicyAllowed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writePolicy(t, path, testPolicy)
	p, err := auth.LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, identity, verb, target string
		want                         bool
	}{
		{"own prefix, write", "team-a-ci", auth.VerbWrite, "team-a/web", true},
		{"own prefix, operate", "team-a-ci", auth.VerbOperate, "team-a/web", true},
		{"another prefix, write", "team-a-ci", auth.VerbWrite, "team-b/web", false},
		{"a prefix is not a namespace without its slash", "team-a-ci", auth.VerbWrite, "team-ab/web", false},
		{"anyone reads", "somebody", auth.VerbRead, "team-b/web", true},
		{"anyone reads names without namespace", "somebody", auth.VerbRead, "solo", true},
		{"nobody else writes", "somebody", auth.VerbWrite, "solo", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Allowed(tt.identity, tt.verb, tt.target); got != tt.want {
				t.Errorf("Allowed(%q, %q, %q) = %v, want %v", tt.identity, tt.verb, tt.target, got, tt.want)
			}
		})
	}
}

func TestPolicyFileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, content, want string }{
		{"unknown verb", "rules:\n- {identities: [a], names: [''], verbs: [delete]}\n", `unknown verb "delete"`},
		{"no identities", "rules:\n- {names: [''], verbs: [read]}\n", "identities"},
		{"no names", "rules:\n- {identities: [a], verbs: [read]}\n", "names"},
		{"unknown field", "rules:\n- {identities: [a], names: [''], verbs: [read], labels: [x]}\n", "labels"},
		{"not YAML", "rules: [", "yaml"},
		{"a namespace without its slash", "rules:\n- {identities: [a], names: [team-a], verbs: [read]}\n", `names[0]: "team-a" is a prefix of every name that starts with it ("team-ab/web"`},
		{"a plain name as a prefix", "rules:\n- {identities: [a], names: ['team-b/', solo], verbs: [write]}\n", `names[1]: "solo"`},
		{"metrics on some names", "rules:\n- {identities: [prometheus], names: [team-a/], verbs: [metrics]}\n", "metrics is about no target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "policy.yaml")
			writePolicy(t, path, tt.content)
			if _, err := auth.LoadPolicy(path); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadPolicy = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// TestPolicyPrefixes: the prefixes that say what they grant load: every
// name, a namespace with its slash, a string prefix ending in '-' or '.',
// a prefix within a namespace.
func TestPolicyPrefixes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writePolicy(t, path, "rules:\n- {identities: [a], names: ['', team-a/, web-, eu., team-b/web], verbs: [read]}\n")
	if _, err := auth.LoadPolicy(path); err != nil {
		t.Fatalf("LoadPolicy: %v", err)
	}
}

// TestPolicyMetrics: the metrics verb is granted on "" to its
// identities alone, and grants nothing else; AllowedAny tells whether an
// identity has a verb on some name.
func TestPolicyMetrics(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writePolicy(t, path, testPolicy+"  - {identities: [prometheus], names: [\"\"], verbs: [metrics]}\n")
	p, err := auth.LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		identity, verb string
		allowed, any   bool
	}{
		{"prometheus", auth.VerbMetrics, true, true},
		{"team-a-ci", auth.VerbMetrics, false, false},
		{"team-a-ci", auth.VerbWrite, false, true}, // on "": no; on team-a/: yes
		{"prometheus", auth.VerbWrite, false, false},
		{"prometheus", auth.VerbOperate, false, false},
		{"prometheus", auth.VerbRead, true, true}, // the "*" rule
	}
	for _, tt := range tests {
		if got := p.Allowed(tt.identity, tt.verb, ""); got != tt.allowed {
			t.Errorf("Allowed(%q, %q, \"\") = %v, want %v", tt.identity, tt.verb, got, tt.allowed)
		}
		if got := p.AllowedAny(tt.identity, tt.verb); got != tt.any {
			t.Errorf("AllowedAny(%q, %q) = %v, want %v", tt.identity, tt.verb, got, tt.any)
		}
	}
}

// TestPolicyReload: a changed file is the new policy (and Changed is
// closed); a bad one keeps the last good policy.
func TestPolicyReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writePolicy(t, path, testPolicy)
	p, err := auth.LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	changed := p.Changed()
	touch := func(content string) {
		writePolicy(t, path, content)
		later := time.Now().Add(time.Hour) // a new version even within the file system's time resolution
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
	}
	touch("rules: [")
	if ok, err := p.Reload(); ok || err == nil {
		t.Fatalf("Reload of a bad file = %v, %v; want an error", ok, err)
	}
	if !p.Allowed("team-a-ci", auth.VerbWrite, "team-a/web") {
		t.Error("a bad file replaced the last good policy")
	}
	touch(strings.Replace(testPolicy, "team-a-ci", "team-b-ci", 1))
	if ok, err := p.Reload(); !ok || err != nil {
		t.Fatalf("Reload = %v, %v", ok, err)
	}
	select {
	case <-changed:
	default:
		t.Error("Changed not closed by a reload")
	}
	if p.Allowed("team-a-ci", auth.VerbWrite, "team-a/web") {
		t.Error("the old rule still applies after the reload")
	}
}

// TestForwardedFor: a call that carries probed-forwarded-for is made for
// that identity (authorized and rate-limited as it) only when its own
// credential is a replica's; from anyone else the metadata is ignored.
func TestForwardedFor(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("replica-token-0123456789 r1\nalice-token-0123456789ab alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	a := auth.New(auth.Options{Tokens: tokens, Replicas: []string{"r1"}, Limiter: auth.NewLimiter(0.001, 1, nil)})
	call := func(token, forFor string) (string, error) {
		md := metadata.Pairs("authorization", "Bearer "+token)
		if forFor != "" {
			md.Set("probed-forwarded-for", forFor)
		}
		var id string
		_, err := a.UnaryInterceptor(metadata.NewIncomingContext(context.Background(), md), nil,
			&grpc.UnaryServerInfo{FullMethod: probev1.ProbeService_ResetTarget_FullMethodName},
			func(ctx context.Context, _ any) (any, error) { id = engine.ClientFrom(ctx); return nil, nil })
		return id, err
	}
	if id, err := call("replica-token-0123456789", "bob"); err != nil || id != "bob" {
		t.Errorf("forwarded by a replica: identity %q, %v; want bob", id, err)
	}
	if id, err := call("alice-token-0123456789ab", "bob"); err != nil || id != "alice" {
		t.Errorf("forwarded-for claimed by alice: identity %q, %v; want alice", id, err)
	}
	// Rate-limited as bob: his bucket (burst 1) is spent, and the
	// replica's own calls for others are not counted against him.
	if _, err := call("replica-token-0123456789", "bob"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), `"bob"`) {
		t.Errorf("second forwarded call for bob: %v, want ResourceExhausted naming bob", err)
	}
	if id, err := call("replica-token-0123456789", "carol"); err != nil || id != "carol" {
		t.Errorf("forwarded for carol: identity %q, %v; want carol (her own bucket)", id, err)
	}
}
