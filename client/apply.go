package client

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TargetSet is the complete desired state of one owner's set of targets
// (ApplyTargets).
type TargetSet struct {
	// Owner names the set (the rules of a target name, e.g.
	// "k8s/cluster-a"); a target belongs to at most one owner.
	Owner string
	// Selector scopes the set: every target carries these labels, and only
	// the owner's targets that carry them are pruned.
	Selector map[string]string
	// Targets is the complete desired list; their status is ignored.
	Targets []*probev1.Target
	// DryRun returns what the call would do and changes nothing.
	DryRun bool
}

// ApplyChunkBytes bounds the targets of one message of an ApplyTargets
// stream, well under probed's --max-request-bytes (1 MiB by default): a
// message holds at least one target, so only a single target larger
// than the server's limit is refused.
const ApplyChunkBytes = 256 << 10

// maxApplyResponseBytes bounds ApplyTargets' reply: up to 20,000 names of
// up to 317 bytes in its lists.
const maxApplyResponseBytes = 64 << 20

// ApplyTargets makes set.Owner's targets exactly set.Targets, as `kubectl
// apply --prune` does: it creates, updates and prunes, leaves the targets
// of other owners alone (a name another owner holds is in the reply's
// conflicts) and returns what it did: the names created, updated,
// unchanged and deleted, and the resulting revision. The same set again
// changes nothing. The targets are streamed in messages of at most
// ApplyChunkBytes; probed applies nothing until it has them all, so a call
// cancelled midway changes nothing.
func (c *Client) ApplyTargets(ctx context.Context, set TargetSet) (*probev1.ApplyTargetsResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a failed send leaves the stream open otherwise
	stream, err := c.svc.ApplyTargets(ctx, grpc.MaxCallRecvMsgSize(maxApplyResponseBytes))
	if err != nil {
		return nil, fromStatus(err)
	}
	for _, msg := range applyMessages(set) {
		if err := stream.Send(msg); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server ended the call: CloseAndRecv says why
			}
			return nil, fromStatus(err)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp, nil
}

// applyMessages splits set into the messages of one ApplyTargets stream:
// the first carries the owner, selector and dry run; each carries targets
// of at most ApplyChunkBytes (at least one).
func applyMessages(set TargetSet) []*probev1.ApplyTargetsRequest {
	first := &probev1.ApplyTargetsRequest{Owner: set.Owner, Selector: set.Selector, DryRun: set.DryRun}
	msgs := []*probev1.ApplyTargetsRequest{first}
	cur, size := first, 0
	for _, t := range set.Targets {
		n := proto.Size(t) + 8
		if len(cur.Targets) > 0 && size+n > ApplyChunkBytes {
			cur, size = &probev1.ApplyTargetsRequest{}, 0
			msgs = append(msgs, cur)
		}
		cur.Targets = append(cur.Targets, t)
		size += n
	}
	return msgs
}
