package cluster

import (
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/keyspace"
)

// member is a live replica as the view knows it.
type member struct {
	id     string
	addr   string
	joined time.Time
	lease  clientv3.LeaseID
}

// decodeMember reads a member key; id is its replica ID.
func decodeMember(id string, kv *mvccpb.KeyValue) (*member, error) {
	v, err := keyspace.DecodeMember(kv.Value)
	if err != nil {
		return nil, fmt.Errorf("member %q: %w", id, err)
	}
	return &member{id: id, addr: v.Addr, joined: v.Joined, lease: clientv3.LeaseID(kv.Lease)}, nil
}
