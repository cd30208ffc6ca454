package server_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
	"github.com/probed/probed/server/auth"
)

// recorder is an Authorizer that allows everything and records who asked
// for what.
type recorder struct {
	mu    sync.Mutex
	calls []string // identity verb name
}

func (r *recorder) Allowed(identity, verb, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, identity+" "+verb+" "+name)
	return true
}
func (*recorder) AllowedAny(string, string) bool { return true }
func (*recorder) Grants(string) string           { return "" }
func (*recorder) Changed() <-chan struct{}       { return nil }

// TestForwardedAsTheCaller: a call forwarded to the target's owner is
// authorized there as the original caller (both replicas check "alice"),
// and carries that identity in probed-forwarded-for, for an owner that
// sees the forwarding replica's own credential (mutual TLS; see
// auth.Options.Replicas).
func TestForwardedAsTheCaller(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("alice-token-0123456789ab alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var forwardedFor []string
	capture := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get(server.MetadataForwardedFor); len(v) > 0 {
			mu.Lock()
			forwardedFor = append(forwardedFor, v...)
			mu.Unlock()
		}
		return h(ctx, req)
	})
	rec := &recorder{}
	opts := probedtest.Options{Server: server.Options{Authorizer: rec}}
	opts.GRPC = append(auth.New(auth.Options{Tokens: tokens}).ServerOptions(), capture)
	rs := probedtest.StartReplicas(t, 2, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer alice-token-0123456789ab")
	r0 := api(rs.Servers[0])
	if _, err := r0.CreateTarget(ctx, &probev1.CreateTargetRequest{Target: &probev1.Target{Name: "r1-web"}}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	rec.calls = nil
	rec.mu.Unlock()
	if _, err := r0.ResetTarget(ctx, &probev1.ResetTargetRequest{Name: "r1-web"}); err != nil {
		t.Fatalf("ResetTarget through replica 0: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// The owner also checks what of the target its response may carry.
	if want := []string{"alice operate r1-web", "alice operate r1-web", "alice read r1-web"}; !slices.Equal(rec.calls, want) {
		t.Errorf("authorization checks %q, want %q (the forwarding replica's and the owner's, both as alice)", rec.calls, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(forwardedFor, []string{"alice"}) {
		t.Errorf("probed-forwarded-for = %q, want [alice]", forwardedFor)
	}
}
