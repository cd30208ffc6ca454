package etcd_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
)

// TestOpenSchema: Open writes the schema version into P/meta, keeps the
// fields the cluster wrote there, accepts its own version and refuses a
// newer one or a P/meta that is not a JSON object.
func TestOpenSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, meta string // "" : no P/meta
		want       string // P/meta after Open
		err        error
	}{
		{"New", "", `{"schema":1}`, nil},
		{"ClusterFirst", `{"shards":4096}`, `{"schema":1,"shards":4096}`, nil},
		{"Same", `{"schema":1,"shards":16}`, `{"schema":1,"shards":16}`, nil},
		{"Newer", `{"schema":2,"shards":16}`, "", etcd.ErrSchemaVersion},
		{"Zero", `{"schema":0}`, "", etcd.ErrCorrupt},
		{"NotJSON", `shards=16`, "", etcd.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := etcdtest.Start(t).Client(t)
			if tc.meta != "" {
				if _, err := cli.Put(t.Context(), "/p/meta", tc.meta); err != nil {
					t.Fatal(err)
				}
			}
			s, err := etcd.Open(t.Context(), etcd.Options{Client: cli, Prefix: "/p", ReplicaID: "a"})
			if !errors.Is(err, tc.err) {
				t.Fatalf("Open = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			defer s.Close()
			resp, err := cli.Get(t.Context(), "/p/meta")
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("P/meta: %v, %v", resp, err)
			}
			var got, want map[string]any
			if err := json.Unmarshal(resp.Kvs[0].Value, &got); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal([]byte(tc.want), &want)
			if len(got) != len(want) || got["schema"] != want["schema"] || got["shards"] != want["shards"] {
				t.Errorf("P/meta = %s, want %s", resp.Kvs[0].Value, tc.want)
			}
		})
	}
}

// TestOpenOptions: bad options are errors naming the field.
func TestOpenOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  etcd.Options
		field string
	}{
		{"NoClient", etcd.Options{ReplicaID: "a"}, "Client"},
		{"NoReplicaID", etcd.Options{}, "ReplicaID"},
		{"SlashInReplicaID", etcd.Options{ReplicaID: "a/b"}, "ReplicaID"},
		{"LongReplicaID", etcd.Options{ReplicaID: strings.Repeat("x", 129)}, "ReplicaID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := etcd.Open(t.Context(), tc.opts)
			if !errors.Is(err, etcd.ErrInvalid) || !strings.Contains(err.Error(), tc.field+":") {
				t.Errorf("Open = %v, want ErrInvalid naming %s", err, tc.field)
			}
		})
	}
}
