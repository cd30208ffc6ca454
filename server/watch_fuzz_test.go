package server

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/target"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// FuzzWatchRequest feeds wire bytes as a client could send them: whatever
// decodes as a WatchRequest either is refused with field errors under
// names, labelSelector or kinds, or is a selection within the bounds
// (target.MaxSelectionNames, target.MaxLabels, target.MaxSelectionBytes,
// one of each kind). The same bytes as a ListTargetsRequest (whose label
// selector has the same field number) follow the same bounds.
func FuzzWatchRequest(f *testing.F) {
	for _, seed := range []*probev1.WatchRequest{
		{},
		{SinceRevision: 7, Names: []string{"web", "db"}, LabelSelector: map[string]string{"app": "demo", "example.com/tier": ""}},
		{Names: []string{"Not_A_Name", ""}, LabelSelector: map[string]string{"-": "-"}},
		{Kinds: []probev1.EventKind{probev1.EventKind_EVENT_KIND_TRANSITION, 0, 99}},
		{Names: make([]string, target.MaxSelectionNames+1)},
		{Namespace: "Not_A_Label", Names: []string{"team-a/web.v1"}},
	} {
		b, err := proto.Marshal(seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req probev1.WatchRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			return
		}
		opts, err := watchOptions(&req)
		checkSelection(t, err, opts.Names, opts.Selector, "names", "labelSelector", "kinds", "namespace")
		if err == nil && len(opts.Kinds) > maxWatchKinds {
			t.Fatalf("%d kinds accepted, want at most %d", len(opts.Kinds), maxWatchKinds)
		}
		var list probev1.ListTargetsRequest
		if err := proto.Unmarshal(data, &list); err != nil {
			return
		}
		err = target.ValidateSelection(nil, list.GetLabelSelector()).Err()
		checkSelection(t, err, nil, list.GetLabelSelector(), "labelSelector")
	})
}

// checkSelection fails t unless err is nil and the selection is within
// the bounds, or err is a field list whose every field is under one of
// roots.
func checkSelection(t *testing.T, err error, names []string, labels map[string]string, roots ...string) {
	t.Helper()
	if err != nil {
		var errs *field.ListError
		if !errors.As(err, &errs) {
			t.Fatalf("error %v is not a field list", err)
		}
		for _, e := range errs.List {
			if !underAny(e.Field, roots) {
				t.Fatalf("error %q is not at a field under %q", e.Error(), roots)
			}
		}
		return
	}
	size := 0
	for _, n := range names {
		size += len(n)
	}
	for k, v := range labels {
		size += len(k) + len(v)
	}
	if len(names) > target.MaxSelectionNames || len(labels) > target.MaxLabels || size > target.MaxSelectionBytes {
		t.Fatalf("a selection of %d names and %d labels (%d bytes) was accepted", len(names), len(labels), size)
	}
}

func underAny(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, r+"[") || strings.HasPrefix(path, r+".") {
			return true
		}
	}
	return false
}
