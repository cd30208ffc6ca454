package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestCreateGetUpdateDeleteReset(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, c := start(t, probedtest.Options{})

	created, err := c.Create(ctx, lingering(plain("web", map[string]string{"app": "web"})))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got := created.GetStatus(); !got.GetReady() || got.GetPhase() != probev1.Phase_PHASE_ACTIVE || got.GetRevision() == 0 {
		t.Errorf("Create status = %v, want active, ready, with a revision", got)
	}

	got, err := c.Get(ctx, "web")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.GetName() != "web" || got.GetLabels()["app"] != "web" {
		t.Errorf("Get = %v, want web with app=web", got)
	}

	updated, err := c.Update(ctx, lingering(plain("web", map[string]string{"app": "web", "tier": "front"})))
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if updated.GetLabels()["tier"] != "front" || updated.GetStatus().GetRevision() <= created.GetStatus().GetRevision() {
		t.Errorf("Update = %v, want tier=front at a newer revision than %d", updated, created.GetStatus().GetRevision())
	}

	reset, err := c.Reset(ctx, "web")
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if reset.GetStatus().GetRevision() <= updated.GetStatus().GetRevision() {
		t.Errorf("Reset revision = %d, want > %d", reset.GetStatus().GetRevision(), updated.GetStatus().GetRevision())
	}

	deleted, err := c.Delete(ctx, "web")
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if deleted.GetStatus().GetPhase() != probev1.Phase_PHASE_TERMINATING {
		t.Errorf("Delete phase = %v, want PHASE_TERMINATING", deleted.GetStatus().GetPhase())
	}
}

func TestApply(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, c := start(t, probedtest.Options{})

	first, created, err := c.Apply(ctx, plain("api", map[string]string{"v": "1"}))
	if err != nil || !created {
		t.Fatalf("Apply (new) = created %v, err %v; want created", created, err)
	}
	second, created, err := c.Apply(ctx, plain("api", map[string]string{"v": "2"}))
	if err != nil || created {
		t.Fatalf("Apply (existing) = created %v, err %v; want updated", created, err)
	}
	if second.GetLabels()["v"] != "2" || second.GetStatus().GetCreateTime().AsTime() != first.GetStatus().GetCreateTime().AsTime() {
		t.Errorf("Apply (existing) = %v, want v=2 and the same create time as %v", second, first)
	}
	if _, _, err := c.Apply(ctx, plain("Not_A_Name", nil)); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("Apply (invalid) error = %v, want ErrInvalid", err)
	}
}

func TestTrigger(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, c := start(t, probedtest.Options{})
	b := probedtest.NewBackend(t, true)
	if _, err := c.Create(ctx, b.Readiness("db")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	resp, err := c.Trigger(ctx, "db", probev1.ProbeType_PROBE_TYPE_READINESS)
	if err != nil {
		t.Fatalf("Trigger: %v", err)
	}
	if got := resp.GetOutcome().GetResult(); got != probev1.Result_RESULT_SUCCESS {
		t.Errorf("Trigger outcome = %v, want RESULT_SUCCESS (%v)", got, resp.GetOutcome())
	}
	if resp.GetStatus().GetEffective().GetPeriod().AsDuration().Milliseconds() != 100 {
		t.Errorf("Trigger effective period = %v, want 100ms", resp.GetStatus().GetEffective().GetPeriod())
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, c := start(t, probedtest.Options{})
	if _, err := c.Create(ctx, plain("exists", nil)); err != nil {
		t.Fatal(err)
	}
	tooLong := plain("bad-period", nil)
	tooLong.ReadinessProbe = &probev1.Probe{
		Handler:            &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: 1}},
		PeriodMilliseconds: ptr[int32](1000),
	}
	twoBad := plain("Bad_Name", nil)
	twoBad.LivenessProbe = &probev1.Probe{
		Handler:          &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: 1}},
		SuccessThreshold: 2,
	}

	tests := []struct {
		name   string
		call   func() error
		is     error
		code   codes.Code
		fields []string // violations of an *InvalidError
	}{
		{"get missing", func() error { _, err := c.Get(ctx, "nope"); return err }, client.ErrNotFound, codes.NotFound, nil},
		{"create duplicate", func() error { _, err := c.Create(ctx, plain("exists", nil)); return err }, client.ErrAlreadyExists, codes.AlreadyExists, nil},
		{"update missing", func() error { _, err := c.Update(ctx, plain("nope", nil)); return err }, client.ErrNotFound, codes.NotFound, nil},
		{"delete missing", func() error { _, err := c.Delete(ctx, "nope"); return err }, client.ErrNotFound, codes.NotFound, nil},
		{"reset missing", func() error { _, err := c.Reset(ctx, "nope"); return err }, client.ErrNotFound, codes.NotFound, nil},
		{"trigger absent probe", func() error {
			_, err := c.Trigger(ctx, "exists", probev1.ProbeType_PROBE_TYPE_LIVENESS)
			return err
		}, client.ErrNotFound, codes.NotFound, nil},
		{"trigger unspecified probe", func() error {
			_, err := c.Trigger(ctx, "exists", probev1.ProbeType_PROBE_TYPE_UNSPECIFIED)
			return err
		}, client.ErrInvalid, codes.InvalidArgument, []string{"probeType"}},
		{"create period out of range", func() error { _, err := c.Create(ctx, tooLong); return err },
			client.ErrInvalid, codes.InvalidArgument, []string{"target.readinessProbe.periodMilliseconds"}},
		{"create two violations", func() error { _, err := c.Create(ctx, twoBad); return err },
			client.ErrInvalid, codes.InvalidArgument, []string{"target.name", "target.livenessProbe.successThreshold"}},
		{"create nil target", func() error { _, err := c.Create(ctx, nil); return err },
			client.ErrInvalid, codes.InvalidArgument, []string{"target"}},
		{"list bad token", func() error {
			_, _, err := c.List(ctx, client.ListOptions{PageToken: "garbage"})
			return err
		}, client.ErrInvalid, codes.InvalidArgument, []string{"pageToken"}},
		{"get canceled", func() error {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := c.Get(cctx, "exists")
			return err
		}, context.Canceled, codes.Canceled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.is) {
				t.Fatalf("error = %v, want errors.Is %v", err, tt.is)
			}
			if got := status.Code(err); got != tt.code {
				t.Errorf("status.Code = %v, want %v", got, tt.code)
			}
			var inv *client.InvalidError
			if !errors.As(err, &inv) {
				if tt.fields != nil {
					t.Fatalf("error %T is not an *InvalidError", err)
				}
				return
			}
			var fields []string
			for _, v := range inv.Violations {
				fields = append(fields, v.Field)
				if v.Description == "" {
					t.Errorf("violation of %s has no description", v.Field)
				}
			}
			if diff := cmp.Diff(tt.fields, fields); diff != "" {
				t.Errorf("violation fields (-want +got):\n%s", diff)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(inv.Violations)+1 {
				t.Errorf("Error() = %q, want a heading and one line per violation", err.Error())
			}
		})
	}
}

func TestInvalidErrorMessage(t *testing.T) {
	t.Parallel()
	_, c := start(t, probedtest.Options{})
	bad := plain("bad", nil)
	bad.ReadinessProbe = &probev1.Probe{
		Handler:            &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: 1}},
		PeriodMilliseconds: ptr[int32](1000),
	}
	_, err := c.Create(t.Context(), bad)
	want := "invalid argument:\n  target.readinessProbe.periodMilliseconds: Invalid value: 1000: must be greater than -1000 and less than 1000"
	if err == nil || err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
}

func TestListAll(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var lists atomic.Int32
	count := client.WithDialOptions(grpc.WithUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if strings.HasSuffix(method, "/ListTargets") {
				lists.Add(1)
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	s := probedtest.Start(t, probedtest.Options{})
	c := dial(t, s.Addr, count)

	// 2,100 targets: ListAll reads pages of 1,000.
	const n = 2100
	var wantEven []string
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		name := fmt.Sprintf("t-%04d", i)
		labels := map[string]string{"parity": "odd"}
		if i%2 == 0 {
			labels["parity"] = "even"
			wantEven = append(wantEven, name)
		}
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := c.Create(ctx, plain(name, labels))
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("Create: %v", err)
		}
	}

	tests := []struct {
		name      string
		labels    map[string]string
		wantCount int
		wantPages int32
		want      []string // nil: only the count is checked
	}{
		{"all", nil, n, 3, nil},
		{"even", map[string]string{"parity": "even"}, n / 2, 2, wantEven},
		{"none", map[string]string{"parity": "none"}, 0, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := lists.Load()
			got, err := c.ListAll(ctx, tt.labels)
			if err != nil {
				t.Fatalf("ListAll: %v", err)
			}
			if len(got) != tt.wantCount {
				t.Fatalf("ListAll returned %d targets, want %d", len(got), tt.wantCount)
			}
			for i := 1; i < len(got); i++ {
				if got[i-1].GetName() >= got[i].GetName() {
					t.Fatalf("ListAll not in name order at %d: %q then %q", i, got[i-1].GetName(), got[i].GetName())
				}
			}
			if tt.want != nil {
				var gotNames []string
				for _, tg := range got {
					gotNames = append(gotNames, tg.GetName())
				}
				if diff := cmp.Diff(tt.want, gotNames); diff != "" {
					t.Errorf("ListAll names (-want +got):\n%s", diff)
				}
			}
			if pages := lists.Load() - before; pages != tt.wantPages {
				t.Errorf("ListAll made %d ListTargets calls, want %d", pages, tt.wantPages)
			}
		})
	}

	t.Run("pages", func(t *testing.T) {
		var seen []string
		opts := client.ListOptions{PageSize: 400, Labels: map[string]string{"parity": "even"}}
		for pages := 1; ; pages++ {
			page, next, err := c.List(ctx, opts)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if len(page) > 400 {
				t.Fatalf("page %d has %d targets, want at most 400", pages, len(page))
			}
			for _, tg := range page {
				seen = append(seen, tg.GetName())
			}
			if next == "" {
				if pages != 3 {
					t.Errorf("read %d pages, want 3", pages)
				}
				break
			}
			opts.PageToken = next
		}
		if diff := cmp.Diff(wantEven, seen); diff != "" {
			t.Errorf("paged names (-want +got):\n%s", diff)
		}
	})
}
