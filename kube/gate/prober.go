package gate

import (
	"context"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// NewProber returns the Prober of a probed client.
func NewProber(c *client.Client) Prober { return &prober{Client: c} }

type prober struct {
	*client.Client
}

// Apply is one ApplyTargets call with the whole set.
func (p *prober) Apply(ctx context.Context, owner string, selector map[string]string, desired []*probev1.Target) (*probev1.ApplyTargetsResponse, error) {
	return p.ApplyTargets(ctx, client.TargetSet{Owner: owner, Selector: selector, Targets: desired})
}
