package gate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// NewProber returns the Prober of a probed client.
func NewProber(c *client.Client) Prober { return &prober{Client: c} }

type prober struct {
	*client.Client
}

// Apply makes the targets carrying selector exactly desired with one call
// per target that differs: it lists them, creates, updates and deletes
// (at once). A desired name held by a target without the selector is a
// conflict, left alone. A target the server finds invalid is reported as
// ApplyTargets reports it: an *client.InvalidError whose fields start with
// "targets[i].".
func (p *prober) Apply(ctx context.Context, _ string, selector map[string]string, desired []*probev1.Target) (*probev1.ApplyTargetsResponse, error) {
	existing, err := p.ListAll(ctx, selector)
	if err != nil {
		return nil, err
	}
	have := make(map[string]*probev1.Target, len(existing))
	for _, t := range existing {
		have[t.GetName()] = t
	}
	resp := &probev1.ApplyTargetsResponse{}
	var invalid []client.FieldViolation
	for i, t := range desired {
		cur, ok := have[t.GetName()]
		delete(have, t.GetName())
		switch {
		case !ok:
			_, err = p.Create(ctx, t)
			if errors.Is(err, client.ErrAlreadyExists) {
				resp.Conflicts = append(resp.Conflicts, &probev1.ApplyConflict{Name: t.GetName(), Message: "held by another owner"})
				continue
			}
			if err == nil {
				resp.Created = append(resp.Created, t.GetName())
			}
		case sameSpec(cur, t):
			resp.Unchanged = append(resp.Unchanged, t.GetName())
			continue
		default:
			_, err = p.Update(ctx, t)
			if err == nil {
				resp.Updated = append(resp.Updated, t.GetName())
			}
		}
		if inv, ok := errors.AsType[*client.InvalidError](err); ok {
			for _, v := range inv.Violations {
				invalid = append(invalid, client.FieldViolation{
					Field:       fmt.Sprintf("targets[%d].%s", i, strings.TrimPrefix(v.Field, "target.")),
					Description: v.Description,
				})
			}
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	if len(invalid) > 0 {
		return nil, &client.InvalidError{Violations: invalid}
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if _, err := p.Delete(ctx, name, client.GracePeriod(0)); err != nil && !errors.Is(err, client.ErrNotFound) {
			return nil, err
		}
		resp.Deleted = append(resp.Deleted, name)
	}
	return resp, nil
}

// sameSpec reports whether two targets have the same spec and labels.
func sameSpec(a, b *probev1.Target) bool {
	a, b = proto.CloneOf(a), proto.CloneOf(b)
	for _, t := range []*probev1.Target{a, b} {
		t.Status, t.Owner = nil, ""
	}
	return proto.Equal(a, b)
}
