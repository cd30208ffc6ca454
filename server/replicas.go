package server

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/probed/probed/engine"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Replicas describes the replicas of a cluster (probed --store=etcd).
type Replicas interface {
	// OwnerOf returns the id of the replica that probes the named target,
	// or "" when none does right now (its shard is changing hands).
	OwnerOf(name string) string
	// Members returns the live replicas.
	Members() []Replica
	// Shards is the number of shards targets are spread over.
	Shards() int
}

// Replica is one live replica.
type Replica struct {
	ID     string
	Addr   string
	Shards int
	Joined time.Time
}

// ListReplicas returns the replicas of the cluster; a single probed is
// one replica owning every target. Under a policy the caller needs read,
// write or operate on some name (an identity granted only metrics gets
// nothing of the API).
func (s *Server) ListReplicas(ctx context.Context, _ *probev1.ListReplicasRequest) (*probev1.ListReplicasResponse, error) {
	if !s.allowedAny(ctx, VerbRead) && !s.allowedAny(ctx, VerbWrite) && !s.allowedAny(ctx, VerbOperate) {
		return nil, status.Error(codes.PermissionDenied, fmt.Sprintf("%q may not list replicas: --authz-policy grants it no read, write or operate", engine.ClientFrom(ctx)))
	}
	resp := &probev1.ListReplicasResponse{Self: s.opts.ReplicaID}
	if s.opts.Replicas == nil {
		resp.Replicas = []*probev1.Replica{{Id: s.opts.ReplicaID, Address: s.opts.Addr}}
		return resp, nil
	}
	resp.Shards = int32(s.opts.Replicas.Shards())
	members := s.opts.Replicas.Members()
	slices.SortFunc(members, func(a, b Replica) int { return cmp.Compare(a.ID, b.ID) })
	for _, m := range members {
		r := &probev1.Replica{Id: m.ID, Address: m.Addr, Shards: int32(m.Shards)}
		if !m.Joined.IsZero() {
			r.JoinTime = timestamppb.New(m.Joined)
		}
		resp.Replicas = append(resp.Replicas, r)
	}
	return resp, nil
}

// target converts t for a response, with the replica that probes it.
func (s *Server) target(a *arena, t *engine.Target) *probev1.Target {
	out := fromTarget(a, t)
	if s.opts.Replicas != nil && out.GetStatus() != nil {
		out.Status.Replica = s.opts.Replicas.OwnerOf(t.Spec.Name)
	}
	return out
}
