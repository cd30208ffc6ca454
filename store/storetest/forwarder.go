package storetest

import (
	"context"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

// Forwarder forwards an apply's updates and prunes of another replica's
// targets to that replica's engine, as the server does over gRPC
// (engine.ApplyForwarder): one it cannot update (not owned there: the
// shard is changing hands) is a conflict.
type Forwarder struct{ To *engine.Engine }

// Update updates specs on f.To; those it cannot update are conflicts.
func (f Forwarder) Update(ctx context.Context, specs []*target.Spec) []engine.ApplyConflict {
	var failed []engine.ApplyConflict
	for _, s := range specs {
		if _, err := f.To.Update(ctx, s); err != nil {
			failed = append(failed, engine.ApplyConflict{Name: s.Name, Message: "not updated: " + err.Error()})
		}
	}
	return failed
}

// Delete deletes names on f.To and returns those it deleted.
func (f Forwarder) Delete(ctx context.Context, names []string) []string {
	var deleted []string
	for _, n := range names {
		if _, err := f.To.Delete(ctx, n); err == nil {
			deleted = append(deleted, n)
		}
	}
	return deleted
}
