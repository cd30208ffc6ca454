package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
	"github.com/probed/probed/server/auth"
)

// applyPolicy: writer writes team-a/, other writes team-a/ too, reader
// only reads.
const applyPolicy = `rules:
  - {identities: [writer, other], names: [team-a/], verbs: [read, write]}
  - {identities: [reader], names: [""], verbs: [read]}
`

// applyServer starts a probed with token authentication, applyPolicy and
// so, limited by limiter (nil: no rate limit), and returns its API.
func applyServer(t *testing.T, so server.Options, limiter *auth.Limiter) probev1.ProbeServiceClient {
	t.Helper()
	dir := t.TempDir()
	tokenFile, policyFile := filepath.Join(dir, "tokens"), filepath.Join(dir, "policy.yaml")
	var tokens strings.Builder
	for _, id := range []string{"writer", "other", "reader"} {
		fmt.Fprintf(&tokens, "tok-%s-0123456789abcdef %s\n", id, id)
	}
	for file, content := range map[string]string{tokenFile: tokens.String(), policyFile: applyPolicy} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tk, err := auth.LoadTokens(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := auth.LoadPolicy(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := so.Authorizer.(checked); ok {
		c.Policy = p
		so.Authorizer = c
	} else {
		so.Authorizer = p
	}
	ao := auth.Options{Tokens: tk}
	if limiter != nil {
		ao.Limiter, so.Limiter = limiter, limiter
	}
	s := probedtest.Start(t, probedtest.Options{GRPC: auth.New(ao).ServerOptions(), Server: so})
	return api(s)
}

// applyTargets are n targets named team-a/NAME-i.
func applyTargets(name string, n int) []*probev1.Target {
	out := make([]*probev1.Target, n)
	for i := range out {
		out[i] = &probev1.Target{Name: fmt.Sprintf("team-a/%s-%d", name, i)}
	}
	return out
}

// openApply opens an ApplyTargets stream as identity and sends msgs,
// without closing its side.
func openApply(t *testing.T, ctx context.Context, c probev1.ProbeServiceClient, identity string, msgs ...*probev1.ApplyTargetsRequest) probev1.ProbeService_ApplyTargetsClient {
	t.Helper()
	stream, err := c.ApplyTargets(as(ctx, identity))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server ended the call: RecvMsg says why
			}
			t.Fatal(err)
		}
	}
	return stream
}

// ended waits for the server to end stream, whose client side is still
// open, and returns its status. A server that waits for the rest of the
// set fails the test after 20 s.
func ended(t *testing.T, stream probev1.ProbeService_ApplyTargetsClient) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- stream.RecvMsg(new(probev1.ApplyTargetsResponse)) }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the server still reads the stream after 20s: it did not end the call at the message that decided it")
		return nil
	}
}

// waitTimers waits until n timers wait on clock; a server that sets none
// fails the test after 20 s.
func waitTimers(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("%d timers on the server's clock after 20s (%v): the server bounds no wait of the stream", n, err)
	}
}

// TestApplyTargetsRefusedAsTheyArrive: the server ends an ApplyTargets
// call at the message that decides it, without waiting for the rest of
// the set: a caller who may write nothing before its first message, a
// target the caller may not write or an invalid one at its message, a
// set beyond its bytes at the message that passes them.
func TestApplyTargetsRefusedAsTheyArrive(t *testing.T) {
	t.Parallel()
	c := applyServer(t, server.Options{MaxApplyBytes: 64 << 10}, nil)
	big := func(name string) *probev1.ApplyTargetsRequest {
		ts := applyTargets(name, 200)
		for _, tg := range ts {
			tg.Labels = map[string]string{"pad": strings.Repeat("x", 63), "more": strings.Repeat("y", 63)}
		}
		return &probev1.ApplyTargetsRequest{Targets: ts}
	}
	tests := []struct {
		name     string
		identity string
		msgs     []*probev1.ApplyTargetsRequest
		code     codes.Code
		want     string
	}{
		{"a caller who may write nothing, before its first message", "reader", nil, codes.PermissionDenied, `"reader" may not write any target`},
		{"a target the caller may not write", "writer", []*probev1.ApplyTargetsRequest{
			{Owner: "o1", Targets: applyTargets("ok", 3)},
			{Targets: []*probev1.Target{{Name: "team-b/web"}}},
		}, codes.PermissionDenied, `"writer" may not write target "team-b/web"`},
		{"an invalid target", "writer", []*probev1.ApplyTargetsRequest{
			{Owner: "o2", Targets: applyTargets("ok", 3)},
			{Targets: []*probev1.Target{{Name: "team-a/Not_A_Name"}}},
		}, codes.InvalidArgument, "targets[3].name"},
		{"a bad owner", "writer", []*probev1.ApplyTargetsRequest{{Owner: "Not An Owner"}}, codes.InvalidArgument, "owner"},
		{"more bytes than a set may hold", "writer", []*probev1.ApplyTargetsRequest{
			{Owner: "o3"}, big("a"), big("b"), big("c"), big("d"), big("e"),
		}, codes.InvalidArgument, "--max-apply-bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stream := openApply(t, t.Context(), c, tt.identity, tt.msgs...)
			err := ended(t, stream)
			if status.Code(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ApplyTargets = %v, want %v mentioning %q", err, tt.code, tt.want)
			}
		})
	}
	if resp, err := c.ListTargets(as(t.Context(), "writer"), &probev1.ListTargetsRequest{}); err != nil || len(resp.GetTargets()) > 0 {
		t.Errorf("targets after refused applies: %v (%v), want none", resp.GetTargets(), err)
	}
}

// TestApplyTargetsPerClient: one identity has at most
// MaxAppliesPerClient calls open; beyond, ResourceExhausted at once;
// another identity is not affected, and a slot is free again once its
// call ends.
func TestApplyTargetsPerClient(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock() // the server's: it shows when a call holds its slot
	c := applyServer(t, server.Options{Clock: clock, MaxAppliesPerClient: 2}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	first := openApply(t, ctx, c, "writer", &probev1.ApplyTargetsRequest{Owner: "o1"})
	openApply(t, t.Context(), c, "writer", &probev1.ApplyTargetsRequest{Owner: "o2"})
	// Each call holds its slot while it waits for messages, with two
	// timers on the server's clock.
	waitTimers(t, clock, 4)
	err := ended(t, openApply(t, t.Context(), c, "writer", &probev1.ApplyTargetsRequest{Owner: "o3"}))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-applies-per-client") {
		t.Fatalf("a third ApplyTargets of writer = %v, want ResourceExhausted naming --max-applies-per-client", err)
	}
	other := openApply(t, t.Context(), c, "other", &probev1.ApplyTargetsRequest{Owner: "p1", Targets: applyTargets("p", 1)})
	if _, err := other.CloseAndRecv(); err != nil {
		t.Errorf("another identity's ApplyTargets = %v, want done", err)
	}
	cancel() // the first call ends: its slot is free again
	_ = first.RecvMsg(new(probev1.ApplyTargetsResponse))
	poll.UntilMet(t, "a slot free again", 10*time.Second, func() string {
		s := openApply(t, t.Context(), c, "writer", &probev1.ApplyTargetsRequest{Owner: "o4", Targets: applyTargets("o4", 1)})
		if _, err := s.CloseAndRecv(); err != nil {
			return fmt.Sprintf("ApplyTargets after one of two ended = %v", err)
		}
		return ""
	})
}

// checked is the policy, telling each name it is asked about for write.
type checked struct {
	*auth.Policy
	names chan string
}

func (c checked) Allowed(identity, verb, name string) bool {
	if verb == auth.VerbWrite {
		select {
		case c.names <- name:
		default:
		}
	}
	return c.Policy.Allowed(identity, verb, name)
}

// TestApplyTargetsDeadlines: a set is sent without pauses longer than
// ApplyIdleTimeout and in ApplyTimeout at most: a stream stalled before
// its first message or half sent ends with DeadlineExceeded, on the
// server's clock, and nothing is applied.
func TestApplyTargetsDeadlines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		idle, overall time.Duration
		halfSent      bool
		want          string
	}{
		{"idle before the first message", time.Minute, time.Hour, false, "no message for 1m0s"},
		{"idle, half sent", time.Minute, time.Hour, true, "no message for 1m0s"},
		{"overall, half sent", time.Hour, time.Minute, true, "not complete within 1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := clockwork.NewFakeClock()
			names := make(chan string, 10)
			c := applyServer(t, server.Options{Clock: clock, ApplyIdleTimeout: tt.idle, ApplyTimeout: tt.overall,
				Authorizer: checked{names: names}}, nil)
			var msgs []*probev1.ApplyTargetsRequest
			if tt.halfSent {
				msgs = append(msgs, &probev1.ApplyTargetsRequest{Owner: "o", Targets: applyTargets("stalled", 2)})
			}
			stream := openApply(t, t.Context(), c, "writer", msgs...)
			if tt.halfSent {
				// The server checked the last target of the message, so it
				// stopped waiting for that message: the two timers below are
				// those of the wait for the next.
				for n := range names {
					if n == "team-a/stalled-1" {
						break
					}
				}
			}
			waitTimers(t, clock, 2) // the call's bound and the wait's; the engine runs on the real clock
			clock.Advance(min(tt.idle, tt.overall))
			err := ended(t, stream)
			if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ApplyTargets stalled = %v, want DeadlineExceeded saying %q", err, tt.want)
			}
			if _, err := c.GetTarget(as(t.Context(), "writer"), &probev1.GetTargetRequest{Name: "team-a/stalled-0"}); status.Code(err) != codes.NotFound {
				t.Errorf("GetTarget after a stalled apply = %v, want NotFound", err)
			}
		})
	}
}

// TestApplyTargetsChargedBySize: a set takes one token of the caller's
// rate limit per ApplyTargetsPerToken targets (its call's token pays for
// the first ones), dry runs included; when a token would come after the
// call's overall bound, the call is ResourceExhausted with a RetryInfo.
func TestApplyTargetsChargedBySize(t *testing.T) {
	t.Parallel()
	size := 2*server.ApplyTargetsPerToken + 1 // 3 tokens
	dryRun := func(c probev1.ProbeServiceClient) error {
		stream := openApply(t, t.Context(), c, "writer", &probev1.ApplyTargetsRequest{Owner: "o", DryRun: true, Targets: applyTargets("t", size)})
		_, err := stream.CloseAndRecv()
		return err
	}
	t.Run("paid", func(t *testing.T) {
		t.Parallel()
		// 3 tokens, one an hour: the set takes all three.
		c := applyServer(t, server.Options{}, auth.NewLimiter(1.0/3600, 3, nil))
		if err := dryRun(c); err != nil {
			t.Fatalf("a dry run of %d targets with 3 tokens = %v", size, err)
		}
		_, err := c.CreateTarget(as(t.Context(), "writer"), &probev1.CreateTargetRequest{Target: &probev1.Target{Name: "team-a/after"}})
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("CreateTarget after a dry run of %d targets = %v, want ResourceExhausted (the set took every token)", size, err)
		}
	})
	t.Run("too few tokens", func(t *testing.T) {
		t.Parallel()
		c := applyServer(t, server.Options{}, auth.NewLimiter(1.0/3600, 2, nil))
		err := dryRun(c)
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "one more token per") {
			t.Fatalf("a dry run of %d targets with 2 tokens = %v, want ResourceExhausted", size, err)
		}
		var retry time.Duration
		for _, d := range status.Convert(err).Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				retry = ri.GetRetryDelay().AsDuration()
			}
		}
		if retry < 59*time.Minute {
			t.Errorf("RetryInfo = %v, want the hour until the next token", retry)
		}
	})
}
