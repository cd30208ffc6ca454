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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"

	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
	"github.com/probed/probed/server/auth"
)

// secretHeader is the value of an HTTP header of every target of
// TestEveryVerbAndPermission: a credential a response may carry only to
// a caller who may read the target.
const secretHeader = "Bearer s3cret-of-team-a"

// permissions are the verbs an identity of TestEveryVerbAndPermission is
// granted, by letter: r read, w write, o operate (on "team-a/"), m
// metrics.
var permissions = map[byte]string{'r': auth.VerbRead, 'w': auth.VerbWrite, 'o': auth.VerbOperate, 'm': auth.VerbMetrics}

// verbRule says what an RPC needs and what its response may carry.
type verbRule struct {
	// verb the call needs on the target's name; "" for a call that is
	// never refused but filtered by read (ListTargets, Watch), anyVerb for
	// one that needs read, write or operate on some name.
	verb string
	// call makes the call for the identity of combo ("" is none) on the
	// namespace team-a; it returns the response.
	call func(ctx context.Context, t *testing.T, c probev1.ProbeServiceClient, combo string) (proto.Message, error)
	// unread, when the caller may not read, is the response it may get
	// (compared after dropping what differs by call: names, revisions);
	// nil means anything without the secret.
	unread func(resp proto.Message) string
}

const anyVerb = "any"

// TestEveryVerbAndPermission calls every RPC of the service as identities
// granted every combination of read, write, operate and metrics on
// "team-a/", and checks that each is allowed exactly when its verb is
// granted (PermissionDenied otherwise) and that a response carries a
// target's spec, status or outcome only to a caller who may read it: a
// caller allowed to write or operate but not to read gets the name and
// the revision, or nothing. An RPC without a row here fails the test:
// adding one means deciding its verb and what its response may carry
// (SECURITY.md, "Authorization").
func TestEveryVerbAndPermission(t *testing.T) {
	t.Parallel()
	combos := []string{""}
	for _, l := range "rwom" {
		for _, c := range combos {
			combos = append(combos, c+string(l))
		}
	}
	var tokens, policy strings.Builder
	policy.WriteString("rules:\n  - {identities: [admin], names: [\"\"], verbs: [read, write, operate]}\n")
	tokens.WriteString("tok-admin-0123456789abcdef admin\n")
	for _, combo := range combos {
		id := identity(combo)
		fmt.Fprintf(&tokens, "tok-%s-0123456789abcdef %s\n", id, id)
		var target []string
		for i := range len(combo) {
			if combo[i] != 'm' {
				target = append(target, permissions[combo[i]])
			}
		}
		if len(target) > 0 {
			fmt.Fprintf(&policy, "  - {identities: [%s], names: [team-a/], verbs: [%s]}\n", id, strings.Join(target, ", "))
		}
		if strings.Contains(combo, "m") {
			fmt.Fprintf(&policy, "  - {identities: [%s], names: [\"\"], verbs: [metrics]}\n", id)
		}
	}
	dir := t.TempDir()
	tokenFile, policyFile := filepath.Join(dir, "tokens"), filepath.Join(dir, "policy.yaml")
	for file, content := range map[string]string{tokenFile: tokens.String(), policyFile: policy.String()} {
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
	s := probedtest.Start(t, probedtest.Options{
		GRPC:   auth.New(auth.Options{Tokens: tk}).ServerOptions(),
		Server: server.Options{Authorizer: p},
	})
	c := api(s)
	port := refused.Port(t)
	spec := func(name string) *probev1.Target {
		return &probev1.Target{Name: name, ReadinessProbe: &probev1.Probe{
			PeriodSeconds: 3600,
			Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: port,
				HttpHeaders: []*probev1.HTTPHeader{{Name: "Authorization", Value: secretHeader}}}},
		}}
	}
	admin := as(t.Context(), "admin")
	mustCreate := func(name string) {
		t.Helper()
		if _, err := c.CreateTarget(admin, &probev1.CreateTargetRequest{Target: spec(name)}); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate("team-a/web")
	for _, combo := range combos {
		mustCreate("team-a/del-" + identity(combo))
	}

	onlyName := func(resp proto.Message) string {
		var tg *probev1.Target
		switch r := resp.(type) {
		case *probev1.CreateTargetResponse:
			tg = r.GetTarget()
		case *probev1.UpdateTargetResponse:
			tg = r.GetTarget()
		case *probev1.DeleteTargetResponse:
			tg = r.GetTarget()
		case *probev1.ResetTargetResponse:
			tg = r.GetTarget()
		default:
			return fmt.Sprintf("unexpected response %T", resp)
		}
		if tg.GetStatus().GetRevision() == 0 {
			return "no revision in the response"
		}
		want := &probev1.Target{Name: tg.GetName(), Status: &probev1.TargetStatus{Revision: tg.GetStatus().GetRevision()}}
		return cmp.Diff(want, tg, protocmp.Transform())
	}
	nothing := func(want proto.Message) func(proto.Message) string {
		return func(resp proto.Message) string { return cmp.Diff(want, resp, protocmp.Transform()) }
	}
	rules := map[string]verbRule{
		probev1.ProbeService_CreateTarget_FullMethodName: {auth.VerbWrite, func(ctx context.Context, _ *testing.T, c probev1.ProbeServiceClient, combo string) (proto.Message, error) {
			return c.CreateTarget(ctx, &probev1.CreateTargetRequest{Target: spec("team-a/new-" + identity(combo))})
		}, onlyName},
		probev1.ProbeService_GetTarget_FullMethodName: {auth.VerbRead, func(ctx context.Context, _ *testing.T, c probev1.ProbeServiceClient, _ string) (proto.Message, error) {
			return c.GetTarget(ctx, &probev1.GetTargetRequest{Name: "team-a/web"})
		}, nil},
		probev1.ProbeService_ListTargets_FullMethodName: {"", func(ctx context.Context, _ *testing.T, c probev1.ProbeServiceClient, _ string) (proto.Message, error) {
			return c.ListTargets(ctx, &probev1.ListTargetsRequest{Namespace: "team-a"})
		}, nothing(&probev1.ListTargetsResponse{})},
		probev1.ProbeService_UpdateTarget_FullMethodName: {auth.VerbWrite, func(ctx context.Context, _ *testing.T, c probev1.ProbeServiceClient, combo string) (proto.Message, error) {
			tg := spec("team-a/web")
			tg.Labels = map[string]string{"updated-by": identity(combo)}
			return c.UpdateTarget(ctx, &probev1.UpdateTargetRequest{Target: tg})
		}, onlyName},
		probev1.ProbeService_DeleteTarget_FullMethodName: {auth.VerbWrite, func(ctx context.Context, _ *testing.T, c probev1.ProbeServiceClient, combo string) (proto.Message, error) {
			return c.DeleteTarget(ctx, &probev1.DeleteTargetRequest{Name: "team-a/del-" + identity(combo)})
		}, onlyName},
		probev1.ProbeService_TriggerProbe_FullMethodName: {auth.VerbOperate, func(ctx context.Context, _ *testing.T, c probev1.ProbeServiceClient, _ string) (proto.Message, error) {
			return c.TriggerProbe(ctx, &probev1.TriggerProbeRequest{Name: "team-a/web", ProbeType: probev1.ProbeType_PROBE_TYPE_READINESS})
		}, nothing(&probev1.TriggerProbeResponse{})},
		probev1.ProbeService_ResetTarget_FullMethodName: {auth.VerbOperate, func(ctx context.Context, _ *testing.T, c probev1.ProbeServiceClient, _ string) (proto.Message, error) {
			return c.ResetTarget(ctx, &probev1.ResetTargetRequest{Name: "team-a/web"})
		}, onlyName},
		probev1.ProbeService_Watch_FullMethodName: {"", func(ctx context.Context, _ *testing.T, c probev1.ProbeServiceClient, _ string) (proto.Message, error) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := c.Watch(ctx, &probev1.WatchRequest{Namespace: "team-a"})
			if err != nil {
				return nil, err
			}
			all := &probev1.WatchResponse{}
			for !all.GetSnapshotComplete() {
				resp, err := stream.Recv()
				if err != nil {
					return nil, err
				}
				all.Events = append(all.Events, resp.GetEvents()...)
				all.SnapshotComplete = resp.GetSnapshotComplete()
			}
			return all, nil
		}, nothing(&probev1.WatchResponse{SnapshotComplete: true})},
		probev1.ProbeService_ListReplicas_FullMethodName: {anyVerb, func(ctx context.Context, _ *testing.T, c probev1.ProbeServiceClient, _ string) (proto.Message, error) {
			return c.ListReplicas(ctx, &probev1.ListReplicasRequest{})
		}, nil},
		probev1.ProbeService_ApplyTargets_FullMethodName: {auth.VerbWrite, func(ctx context.Context, _ *testing.T, c probev1.ProbeServiceClient, combo string) (proto.Message, error) {
			stream, err := c.ApplyTargets(ctx)
			if err != nil {
				return nil, err
			}
			err = stream.Send(&probev1.ApplyTargetsRequest{Owner: "o-" + identity(combo), Targets: []*probev1.Target{spec("team-a/set-" + identity(combo))}})
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return stream.CloseAndRecv()
		}, nil},
	}

	for _, rpc := range rpcs() {
		rule, ok := rules[rpc]
		if !ok {
			t.Errorf("%s has no rule in TestEveryVerbAndPermission: decide the verb it needs and what its response carries to a caller who may not read (SECURITY.md, Authorization)", rpc)
			continue
		}
		for _, combo := range combos {
			granted := map[string]bool{}
			for i := range len(combo) {
				granted[permissions[combo[i]]] = true
			}
			t.Run(strings.TrimPrefix(rpc, "/probe.v1.ProbeService/")+"/"+identity(combo), func(t *testing.T) {
				resp, err := rule.call(as(t.Context(), identity(combo)), t, c, combo)
				allowed := true
				switch rule.verb {
				case "":
				case anyVerb:
					allowed = granted[auth.VerbRead] || granted[auth.VerbWrite] || granted[auth.VerbOperate]
				default:
					allowed = granted[rule.verb]
				}
				switch {
				case !allowed && status.Code(err) != codes.PermissionDenied:
					t.Fatalf("%s = %v, want PermissionDenied", identity(combo), err)
				case !allowed:
					return
				case err != nil:
					t.Fatalf("%s = %v, want allowed", identity(combo), err)
				}
				text := prototext.Format(resp)
				if granted[auth.VerbRead] {
					return
				}
				if strings.Contains(text, "s3cret") {
					t.Errorf("the response to %s, who may not read, carries the credential header:\n%s", identity(combo), text)
				}
				if rule.unread != nil {
					if diff := rule.unread(resp); diff != "" {
						t.Errorf("the response to %s, who may not read, carries more than it may (-may +got):\n%s", identity(combo), diff)
					}
				}
			})
		}
	}
}

// rpcs are the full names of every RPC of the service.
func rpcs() []string {
	d := probev1.ProbeService_ServiceDesc
	var out []string
	for _, m := range d.Methods {
		out = append(out, "/"+d.ServiceName+"/"+m.MethodName)
	}
	for _, st := range d.Streams {
		out = append(out, "/"+d.ServiceName+"/"+st.StreamName)
	}
	return out
}

// identity is the name of the identity granted combo.
func identity(combo string) string {
	if combo == "" {
		return "p-none"
	}
	return "p-" + combo
}

// as is ctx with the bearer token of identity.
func as(ctx context.Context, identity string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-"+identity+"-0123456789abcdef")
}
