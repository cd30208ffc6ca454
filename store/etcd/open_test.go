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

// TestOpenSettings: the first replica records its settings in P/meta; a
// later one with the same settings opens, one with a different value, a
// setting more or one less is ErrSettings naming each difference.
func TestOpenSettings(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	first := map[string]string{"--min-period": "10ms", "--min-timeout": "100ms"}
	s, err := etcd.Open(t.Context(), etcd.Options{Client: cli, ReplicaID: "a", Settings: first})
	if err != nil {
		t.Fatalf("first Open = %v", err)
	}
	s.Close()
	for _, tc := range []struct {
		name     string
		settings map[string]string
		want     string // "" : opens
	}{
		{"Same", map[string]string{"--min-timeout": "100ms", "--min-period": "10ms"}, ""},
		{"Different", map[string]string{"--min-period": "100ms", "--min-timeout": "100ms"}, `--min-period: the cluster's is "10ms", this replica's "100ms"`},
		{"More", map[string]string{"--min-period": "10ms", "--min-timeout": "100ms", "--feature-gates": "X=true"}, `--feature-gates: the cluster has none, this replica "X=true"`},
		{"Fewer", map[string]string{"--min-period": "10ms"}, `--min-timeout: the cluster's is "100ms", this replica has none`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := etcd.Open(t.Context(), etcd.Options{Client: cli, ReplicaID: "b", Settings: tc.settings})
			if err == nil {
				s.Close()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Open = %v, want it to open", err)
			case tc.want != "" && (!errors.Is(err, etcd.ErrSettings) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Open = %v, want ErrSettings saying %s", err, tc.want)
			}
		})
	}
}
