package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/target"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// List page sizes.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// CreateTarget registers a target; see the proto for the contract.
func (s *Server) CreateTarget(ctx context.Context, req *probev1.CreateTargetRequest) (*probev1.CreateTargetResponse, error) {
	if req.GetTarget() == nil {
		return nil, s.toStatus(field.List{field.Required(field.NewPath("target"), "a target is required")}.Err())
	}
	if err := s.authorize(ctx, VerbWrite, req.GetTarget().GetName()); err != nil {
		return nil, err
	}
	t, err := s.engine.Create(ctx, toSpec(req.GetTarget()))
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &probev1.CreateTargetResponse{Target: s.shown(ctx, t)}, nil
}

// GetTarget returns one target.
func (s *Server) GetTarget(ctx context.Context, req *probev1.GetTargetRequest) (*probev1.GetTargetResponse, error) {
	if err := validateName(req.GetName()); err != nil {
		return nil, s.toStatus(err)
	}
	if err := s.authorize(ctx, VerbRead, req.GetName()); err != nil {
		return nil, err
	}
	t, err := s.engine.Get(ctx, req.GetName())
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &probev1.GetTargetResponse{Target: s.target(nil, t)}, nil
}

// ListTargets returns one page of targets in name order: at most pageSize
// targets, and at most MaxResponseBytes.
func (s *Server) ListTargets(ctx context.Context, req *probev1.ListTargetsRequest) (*probev1.ListTargetsResponse, error) {
	var errs field.List
	size := int(req.GetPageSize())
	switch {
	case size < 0:
		errs = append(errs, field.Invalid(field.NewPath("pageSize"), size, "must be greater than or equal to 0"))
	case size == 0:
		size = DefaultPageSize
	case size > MaxPageSize:
		size = MaxPageSize
	}
	after, err := decodePageToken(req.GetPageToken())
	if err != nil {
		errs = append(errs, field.Invalid(field.NewPath("pageToken"), req.GetPageToken(), "not a token returned by ListTargets"))
	}
	errs = append(errs, target.ValidateSelection(nil, req.GetLabelSelector())...)
	errs = append(errs, validateNamespace(field.NewPath("namespace"), req.GetNamespace())...)
	if err := errs.Err(); err != nil {
		return nil, s.toStatus(err)
	}
	opts := listOptions(after, size, req.GetLabelSelector())
	opts.Namespace, opts.Visible = req.GetNamespace(), s.visible(ctx)
	targets, more, err := s.listPage(ctx, opts)
	if err != nil {
		return nil, s.toStatus(err)
	}
	resp := &probev1.ListTargetsResponse{Targets: targets}
	// A page of large targets is cut by bytes; the rest comes next.
	if n := fitPage(resp.Targets); n < len(resp.Targets) {
		resp.Targets, more = resp.Targets[:n], true
	}
	if more && len(resp.Targets) > 0 {
		resp.NextPageToken = encodePageToken(resp.Targets[len(resp.Targets)-1].GetName())
	}
	return resp, nil
}

// UpdateTarget replaces a target's spec in place.
func (s *Server) UpdateTarget(ctx context.Context, req *probev1.UpdateTargetRequest) (*probev1.UpdateTargetResponse, error) {
	if req.GetTarget() == nil {
		return nil, s.toStatus(field.List{field.Required(field.NewPath("target"), "a target is required")}.Err())
	}
	if err := s.authorize(ctx, VerbWrite, req.GetTarget().GetName()); err != nil {
		return nil, err
	}
	spec := toSpec(req.GetTarget())
	return owned(ctx, s, spec.Name, func(ctx context.Context) (*probev1.UpdateTargetResponse, error) {
		t, err := s.engine.Update(ctx, spec)
		if err != nil {
			return nil, err
		}
		return &probev1.UpdateTargetResponse{Target: s.shown(ctx, t)}, nil
	}, func(ctx context.Context, c probev1.ProbeServiceClient) (*probev1.UpdateTargetResponse, error) {
		return c.UpdateTarget(ctx, req)
	})
}

// DeleteTarget starts the graceful removal of a target, or shortens it.
func (s *Server) DeleteTarget(ctx context.Context, req *probev1.DeleteTargetRequest) (*probev1.DeleteTargetResponse, error) {
	errs := nameErrors(req.GetName())
	var opts []engine.DeleteOption
	if g := req.GracePeriodSeconds; g != nil {
		if *g < 0 {
			errs = append(errs, field.Invalid(field.NewPath("gracePeriodSeconds"), *g, "must be greater than or equal to 0"))
		}
		opts = append(opts, engine.WithGracePeriod(seconds(*g)))
	}
	if err := errs.Err(); err != nil {
		return nil, s.toStatus(err)
	}
	if err := s.authorize(ctx, VerbWrite, req.GetName()); err != nil {
		return nil, err
	}
	return owned(ctx, s, req.GetName(), func(ctx context.Context) (*probev1.DeleteTargetResponse, error) {
		t, err := s.engine.Delete(ctx, req.GetName(), opts...)
		if err != nil {
			return nil, err
		}
		return &probev1.DeleteTargetResponse{Target: s.shown(ctx, t)}, nil
	}, func(ctx context.Context, c probev1.ProbeServiceClient) (*probev1.DeleteTargetResponse, error) {
		return c.DeleteTarget(ctx, req)
	})
}

// TriggerProbe runs one probe now; its outcome and the probe's status
// reach a caller who may read the target, an empty response one who may
// only operate it.
func (s *Server) TriggerProbe(ctx context.Context, req *probev1.TriggerProbeRequest) (*probev1.TriggerProbeResponse, error) {
	errs := nameErrors(req.GetName())
	typ, ok := toDomain(probeTypes, req.GetProbeType())
	if !ok {
		errs = append(errs, field.Invalid(field.NewPath("probeType"), req.GetProbeType().String(),
			"must be PROBE_TYPE_STARTUP, PROBE_TYPE_LIVENESS or PROBE_TYPE_READINESS"))
	}
	if err := errs.Err(); err != nil {
		return nil, s.toStatus(err)
	}
	if err := s.authorize(ctx, VerbOperate, req.GetName()); err != nil {
		return nil, err
	}
	return owned(ctx, s, req.GetName(), func(ctx context.Context) (*probev1.TriggerProbeResponse, error) {
		at := s.opts.Clock.Now()
		out, t, err := s.engine.Trigger(ctx, req.GetName(), typ)
		if err != nil {
			return nil, err
		}
		if !s.allowed(ctx, VerbRead, req.GetName()) {
			// The probe ran; its outcome and status are the target's to
			// read.
			return &probev1.TriggerProbeResponse{}, nil
		}
		p := &t.Status.Probes[typ]
		return &probev1.TriggerProbeResponse{
			Outcome: fromOutcome(out, at),
			Status:  fromProbeStatus(nil, p, t.Spec.Probe(typ)),
		}, nil
	}, func(ctx context.Context, c probev1.ProbeServiceClient) (*probev1.TriggerProbeResponse, error) {
		return c.TriggerProbe(ctx, req)
	})
}

// ResetTarget returns a target's probes to their initial state.
func (s *Server) ResetTarget(ctx context.Context, req *probev1.ResetTargetRequest) (*probev1.ResetTargetResponse, error) {
	if err := validateName(req.GetName()); err != nil {
		return nil, s.toStatus(err)
	}
	if err := s.authorize(ctx, VerbOperate, req.GetName()); err != nil {
		return nil, err
	}
	return owned(ctx, s, req.GetName(), func(ctx context.Context) (*probev1.ResetTargetResponse, error) {
		t, err := s.engine.Reset(ctx, req.GetName())
		if err != nil {
			return nil, err
		}
		return &probev1.ResetTargetResponse{Target: s.shown(ctx, t)}, nil
	}, func(ctx context.Context, c probev1.ProbeServiceClient) (*probev1.ResetTargetResponse, error) {
		return c.ResetTarget(ctx, req)
	})
}

func nameErrors(name string) field.List {
	switch {
	case name == "":
		return field.List{field.Required(field.NewPath("name"), "a target name is required")}
	case len(name) > target.MaxNameBytes:
		// No such target can exist; and a not-found error would echo it.
		return field.List{field.TooLong(field.NewPath("name"), target.MaxNameBytes)}
	}
	return nil
}

func validateName(name string) error { return nameErrors(name).Err() }

// validateNamespace checks a namespace filter: empty, or a namespace as
// in a NAMESPACE/NAME target name.
func validateNamespace(path *field.Path, ns string) field.List {
	if ns == "" {
		return nil
	}
	if errs := target.ValidateName(path, ns+"/x"); len(errs) > 0 {
		return field.List{field.Invalid(path, ns, "a namespace must be a DNS-1123 label: at most 63 lower case alphanumeric characters or '-', starting and ending with an alphanumeric character")}
	}
	return nil
}

// seconds converts n seconds to a Duration, saturating rather than
// wrapping around.
func seconds(n int64) time.Duration {
	const limit = int64(math.MaxInt64 / time.Second)
	if n > limit {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}

func encodePageToken(last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("after:" + last))
}

func decodePageToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < len("after:") || string(b[:len("after:")]) != "after:" {
		return "", fmt.Errorf("bad page token %q", tok)
	}
	return string(b[len("after:"):]), nil
}
