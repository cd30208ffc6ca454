package server_test

import (
	"context"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestApplyTargetsStream: the stream's messages are checked as one
// request (InvalidArgument naming the field), and a stream that ends
// before the client closes its side changes nothing.
func TestApplyTargetsStream(t *testing.T) {
	t.Parallel()
	s := probedtest.Start(t, probedtest.Options{})
	c := api(s)
	tg := func(name string, labels ...string) *probev1.Target {
		l := map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			l[labels[i]] = labels[i+1]
		}
		return &probev1.Target{Name: name, Labels: l}
	}
	tests := []struct {
		name  string
		msgs  []*probev1.ApplyTargetsRequest
		field string // "" for a plain InvalidArgument
	}{
		{"no message", nil, ""},
		{"no owner", []*probev1.ApplyTargetsRequest{{Targets: []*probev1.Target{tg("a")}}}, "owner"},
		{"another owner later", []*probev1.ApplyTargetsRequest{{Owner: "o"}, {Owner: "p"}}, "owner"},
		{"dry run only later", []*probev1.ApplyTargetsRequest{{Owner: "o"}, {DryRun: true}}, "dryRun"},
		{"a name twice across messages", []*probev1.ApplyTargetsRequest{{Owner: "o", Targets: []*probev1.Target{tg("a")}}, {Targets: []*probev1.Target{tg("a")}}}, "targets[1].name"},
		{"a target outside the selector", []*probev1.ApplyTargetsRequest{{Owner: "o", Selector: map[string]string{"set": "x"}, Targets: []*probev1.Target{tg("a", "set", "y")}}}, "targets[0].labels"},
		{"an invalid target", []*probev1.ApplyTargetsRequest{{Owner: "o", Targets: []*probev1.Target{tg("a"), tg("B")}}}, "targets[1].name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stream, err := c.ApplyTargets(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tt.msgs {
				if err := stream.Send(m); err != nil {
					break
				}
			}
			_, err = stream.CloseAndRecv()
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("ApplyTargets = %v, want InvalidArgument", err)
			}
			if tt.field == "" {
				return
			}
			var fields []string
			for _, d := range status.Convert(err).Details() {
				if br, ok := d.(*errdetails.BadRequest); ok {
					for _, v := range br.GetFieldViolations() {
						fields = append(fields, v.GetField())
					}
				}
			}
			if len(fields) == 0 || fields[0] != tt.field {
				t.Errorf("field violations %v, want %s", fields, tt.field)
			}
		})
	}

	t.Run("cancelled before the end", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		stream, err := c.ApplyTargets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&probev1.ApplyTargetsRequest{Owner: "cut", Targets: []*probev1.Target{tg("cut-0"), tg("cut-1")}}); err != nil {
			t.Fatal(err)
		}
		// Cancelled without closing the client's side: CloseAndRecv would
		// send END_STREAM, which can reach the server before the
		// cancellation's RST_STREAM (grpc-go sends that asynchronously),
		// and the server then rightly applies a complete set.
		cancel()
		if err := stream.RecvMsg(new(probev1.ApplyTargetsResponse)); status.Code(err) != codes.Canceled {
			t.Fatalf("RecvMsg after cancel = %v", err)
		}
		for _, name := range []string{"cut-0", "cut-1"} {
			if _, err := c.GetTarget(t.Context(), &probev1.GetTargetRequest{Name: name}); status.Code(err) != codes.NotFound {
				t.Errorf("GetTarget(%s) after a cancelled apply = %v, want NotFound", name, err)
			}
		}
	})
}
