package etcd_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/codec"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// TestRestartSeesEverything: what two replicas wrote, a new store (a
// restarted replica) loads exactly, as each writer does.
func TestRestartSeesEverything(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a := open(t, c.Client(t), etcd.Options{ReplicaID: "a"})
	b := open(t, c.Client(t), etcd.Options{ReplicaID: "b"})
	web := createWeb("web")
	commit(t, a, web, transition(web, 1))
	db := create("db")
	commit(t, b, db)
	commit(t, b, storetest.Delete("db", at(5)), create("job"))

	got := load(t, open(t, c.Client(t), etcd.Options{ReplicaID: "a"}))
	for name, s := range map[string]*etcd.Store{"a": a, "b": b} {
		if diff := cmp.Diff(load(t, s), got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("replica %s and a restarted one load differently (-%s +restarted):\n%s", name, name, diff)
		}
	}
	if len(got.Targets) != 2 || got.Targets[0].Spec.Name != "job" || got.Targets[1].Spec.Name != "web" {
		t.Errorf("targets %v, want job and web", got.Targets)
	}
	if len(got.Events) != 5 {
		t.Errorf("events %v, want 5", revisions(got.Events))
	}
	if last := got.Events[len(got.Events)-1].Revision; got.Revision <= last || got.Revision&1023 != 1023 {
		t.Errorf("Revision = %d, want the position after %d", got.Revision, last)
	}
}

// TestLoadRefusesBadValues: a value that is not probed's is an error
// naming its key; a newer probed's is codec.ErrNewerFormat.
func TestLoadRefusesBadValues(t *testing.T) {
	t.Parallel()
	newer := []byte{codec.Version + 1, 0}
	status, err := codec.MarshalStatus(&storetest.Create(storetest.BareSpec("x"), at(0)).Target.Status)
	if err != nil {
		t.Fatal(err)
	}
	badIndex := append([]byte(nil), status...)
	badIndex = append(badIndex, 0x48, 0x80, 0x08) // revision (field 9) 1024
	for _, tc := range []struct {
		name     string
		key, val string
		want     error
	}{
		{"Garbage spec", "/probed/specs/web", "{not protobuf", etcd.ErrCorrupt},
		{"Newer spec", "/probed/specs/web", string(newer), codec.ErrNewerFormat},
		{"Garbage events", "/probed/events", "\x01\xff\xff", etcd.ErrCorrupt},
		{"Status index", "/probed/status/web", string(badIndex), etcd.ErrCorrupt},
		{"Spec without status", "/probed/status/web", "", etcd.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := etcdtest.Start(t)
			cli := c.Client(t)
			s := open(t, cli, etcd.Options{ReplicaID: "a"})
			commit(t, s, createWeb("web"))
			var err error
			if tc.val == "" {
				_, err = cli.Delete(t.Context(), tc.key)
			} else {
				_, err = cli.Put(t.Context(), tc.key, tc.val)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Load(t.Context())
			if !errors.Is(err, tc.want) {
				t.Errorf("Load = %v, want %v", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), "/probed/") {
				t.Errorf("Load = %v, want the key named", err)
			}
		})
	}
}
