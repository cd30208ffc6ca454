package cluster

import (
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// memberValue is the value of P/members/<id>.
type memberValue struct {
	Addr   string    `json:"addr"`
	Joined time.Time `json:"joined"`
}

func (v memberValue) encode() string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a string and a time always marshal
	}
	return string(b)
}

// member is a live replica as the view knows it.
type member struct {
	id     string
	addr   string
	joined time.Time
	lease  clientv3.LeaseID
}

// decodeMember reads a member key; id is its replica ID.
func decodeMember(id string, kv *mvccpb.KeyValue) (*member, error) {
	var v memberValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return nil, fmt.Errorf("member %q: %w", id, err)
	}
	return &member{id: id, addr: v.Addr, joined: v.Joined, lease: clientv3.LeaseID(kv.Lease)}, nil
}
