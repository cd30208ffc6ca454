package keyspace_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The keys, exactly: a change of one breaks every replica running the
// release before it (they share etcd during a rolling upgrade).
func TestKeys(t *testing.T) {
	t.Parallel()
	k := keyspace.New("/p", 16)
	tests := []struct {
		name, got, want string
	}{
		{"prefix", k.Prefix(), "/p/"},
		{"meta", k.Meta(), "/p/meta"},
		{"events", k.Events(), "/p/events"},
		{"spec", k.Spec("ns/web"), "/p/specs/ns/web"},
		{"status", k.Status("ns/web"), "/p/status/ns/web"},
		{"writer", k.Writer("r1", 0), "/p/writers/r1"},
		{"another writer of the replica", k.Writer("r1", 3), "/p/writers/r1/3"},
		{"watermark", k.Watermark("r1"), "/p/watermarks/r1"},
		{"member", k.Member("r1"), "/p/members/r1"},
		{"shard", k.Shard(7), "/p/shards/0007"},
		{"last shard", k.Shard(15), "/p/shards/0015"},
		{"election", k.Election(), "/p/leader/"},
		{"total count", k.UsageTotal(), "/p/usage/total"},
		{"client count", k.UsageClient("alice"), "/p/usage/clients/alice"},
		{"counts repaired", k.UsageRepaired(), "/p/usage/repaired"},
		{"apply record", k.SetHead("ns/web"), "/p/targetsets/ns/web"},
		{"apply lock", k.SetLock("ns/web"), "/p/targetsets/ns/web@lock"},
		{"apply chunk", k.SetChunk("ns/web", "0a1b", 3), "/p/targetsets/ns/web@chunks/0a1b/000003"},
		{"default prefix", keyspace.New("", 1).Prefix(), "/probed/"},
		{"five-digit shards", keyspace.New("/p/", 65536).Shard(65535), "/p/shards/65535"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

// The store's one watch (Followed) holds, by lexical order, the event log
// and every key of membership and ownership, and none of the keys that
// the event log repeats or that the store writes beside it: the cluster's
// view and the store's ownership are fed by that watch alone. A new key
// goes in one list or the other.
func TestFollowedRange(t *testing.T) {
	t.Parallel()
	k := keyspace.New("/p/", 16)
	start, end := k.Followed()
	followed := []string{k.Events(), k.Election() + "694d9", k.Member("r1"), k.Meta(), k.Shard(0), k.Shard(15)}
	// Not the applies' journal (a record holds a whole desired list) nor
	// the counts of targets (moved by every create and removal): their
	// readers read them; no replica's view is made of them.
	other := []string{k.Spec("web"), k.Status("web"), k.Writer("r1", 0), k.Writer("r1", 15), k.Watermark("r1"),
		k.UsageTotal(), k.UsageClient("alice"), k.UsageClient(""), k.UsageRepaired(),
		k.SetHead("ns/web"), k.SetLock("ns/web"), k.SetChunk("ns/web", "0a1b", 3), k.SetHead("!"),
		"/p/applies/set", "/p/counts/client", "/q/events", "/p/zzz"}
	for _, key := range followed {
		if key < start || key >= end {
			t.Errorf("%q is outside the followed range [%q, %q)", key, start, end)
		}
	}
	for _, key := range other {
		if key >= start && key < end {
			t.Errorf("%q is inside the followed range [%q, %q)", key, start, end)
		}
	}
	mstart, mend := k.Membership()
	for _, key := range []string{k.Member("r1"), k.Shard(0), k.Shard(15)} {
		if key < mstart || key >= mend {
			t.Errorf("%q is outside the membership range [%q, %q)", key, mstart, mend)
		}
		if key < start || key >= end {
			t.Errorf("%q: the membership range is not followed", key)
		}
	}
}

// An owner's lock and chunks are apart from every other owner's record:
// a read of one owner's chunks never holds another's, and owner names
// (target names) never hold "@".
func TestApplyKeysApart(t *testing.T) {
	t.Parallel()
	k := keyspace.New("/p/", 16)
	if k.SetChunks("ns/web") <= k.SetHead("ns/web") || strings.HasPrefix(k.SetHead("ns/web2"), k.SetChunks("ns/web")) {
		t.Error("an owner's chunks are not apart from other owners' records")
	}
	if !strings.HasPrefix(k.SetLock("ns/web"), k.TargetSets()) || !strings.HasPrefix(k.UsageClient("a"), k.Usage()) {
		t.Error("a lock or a count outside its prefix")
	}
	if a, b := k.SetChunk("s", "g", 9), k.SetChunk("s", "g", 10); a >= b {
		t.Errorf("chunk 9 (%q) does not sort before chunk 10 (%q)", a, b)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	k := keyspace.New("/p/", 16)
	if s, ok := k.ParseShard("/p/shards/0007"); !ok || s != 7 {
		t.Errorf("ParseShard(/p/shards/0007) = %d, %t", s, ok)
	}
	for _, key := range []string{"/p/shards/7", "/p/shards/0016", "/p/shards/x", "/q/shards/0007", "/p/members/r1"} {
		if s, ok := k.ParseShard(key); ok {
			t.Errorf("ParseShard(%q) = %d, want no shard", key, s)
		}
	}
	if id, ok := k.ParseMember("/p/members/r1"); !ok || id != "r1" {
		t.Errorf("ParseMember(/p/members/r1) = %q, %t", id, ok)
	}
	if id, ok := k.ParseMember("/p/members/"); ok {
		t.Errorf("ParseMember(/p/members/) = %q, want no member", id)
	}
}

// A target's shard is fnv-1a of its name: every replica, of every
// version, assigns it the same one.
func TestShardOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		shards int
		want   int
	}{
		{"web", 4096, 3217},
		{"ns/api-7", 4096, 3569},
		{"", 4096, 3525},
		{"web", 16, 1},
	}
	for _, tt := range tests {
		if got := keyspace.ShardOf(tt.name, tt.shards); got != tt.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tt.name, tt.shards, got, tt.want)
		}
	}
}

// Revisions: etcd's revision of the transaction, then 10 bits of index.
func TestRevisionEncoding(t *testing.T) {
	t.Parallel()
	if got := keyspace.Revision(5, 3); got != 5<<10|3 {
		t.Errorf("Revision(5, 3) = %d", got)
	}
	if got := keyspace.Position(5); got != 5<<10|1023 {
		t.Errorf("Position(5) = %d", got)
	}
	if got := keyspace.EtcdRevision(keyspace.Position(5)); got != 5 {
		t.Errorf("EtcdRevision(Position(5)) = %d", got)
	}
	if got := keyspace.EtcdRevision(keyspace.Revision(5, 0)); got != 5 {
		t.Errorf("EtcdRevision(Revision(5, 0)) = %d", got)
	}
	if got := keyspace.Position(5) + 1; got != keyspace.Revision(6, 0) {
		t.Errorf("Position(5)+1 = %d, want Revision(6, 0)", got)
	}
	if got := keyspace.CompactedBelow(5); got != keyspace.Position(4) {
		t.Errorf("CompactedBelow(5) = %d, want Position(4)", got)
	}
	if got := keyspace.CompactedBelow(0); got != 0 {
		t.Errorf("CompactedBelow(0) = %d", got)
	}
}

// A member key's value: its JSON fields, which other versions read.
func TestMemberValue(t *testing.T) {
	t.Parallel()
	m := keyspace.Member{Addr: "10.0.0.1:50051", Joined: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), Instance: "0a1b"}
	var fields map[string]any
	if err := json.Unmarshal([]byte(m.Encode()), &fields); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"addr": "10.0.0.1:50051", "joined": "2026-11-28T00:00:00Z", "instance": "0a1b"}
	if len(fields) != len(want) {
		t.Errorf("fields %v, want %v", fields, want)
	}
	for f, v := range want {
		if fields[f] != v {
			t.Errorf("%s = %v, want %v", f, fields[f], v)
		}
	}
	got, err := keyspace.DecodeMember([]byte(`{"addr":"a:1","joined":"2026-11-28T00:00:00Z"}`))
	if err != nil || got.Addr != "a:1" || got.Instance != "" {
		t.Errorf("a member key of a version without instances: %+v, %v", got, err)
	}
}

// P/meta is read, modified and written back only if nobody wrote it
// meanwhile: writers of different fields at once keep each other's.
func TestUpdateMetaKeepsOthersFields(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	k := keyspace.New("/p/", 16)
	once := func(ctx context.Context, do func(context.Context) error) error { return do(ctx) }
	fields := []string{keyspace.MetaSchema, keyspace.MetaSettings, keyspace.MetaShards, "other"}
	var wg sync.WaitGroup
	errs := make([]error, len(fields))
	for i, f := range fields {
		wg.Go(func() {
			errs[i] = keyspace.UpdateMeta(t.Context(), cli, k.Meta(), once, func(m keyspace.Meta) (bool, error) {
				if _, ok := m[f]; ok {
					return false, nil
				}
				m[f], _ = json.Marshal(i)
				return true, nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("UpdateMeta of %s: %v", fields[i], err)
		}
	}
	resp, err := cli.Get(t.Context(), k.Meta())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]int
	if err := json.Unmarshal(resp.Kvs[0].Value, &got); err != nil {
		t.Fatal(err)
	}
	for i, f := range fields {
		if v, ok := got[f]; !ok || v != i {
			t.Errorf("P/meta %s = %d (%t), want %d: %s", f, v, ok, i, resp.Kvs[0].Value)
		}
	}
	if len(got) != len(fields) {
		t.Errorf("P/meta has %d fields, want %d: %s", len(got), len(fields), resp.Kvs[0].Value)
	}
}
