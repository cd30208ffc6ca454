package codec_test

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	storagev1 "github.com/probed/probed/proto/probed/storage/v1"
	"github.com/probed/probed/store/codec"
	"github.com/probed/probed/store/storetest"
)

// TestBatchChangeFields fails when engine.Change gains an exported field:
// MarshalBatch must then store it (or say why not).
func TestBatchChangeFields(t *testing.T) {
	// Fields that are conditions of the write, not part of the change.
	notStored := map[string]string{
		"Apply": "the lock of the apply that makes the change (store/etcd fences its creates with it)",
	}
	var got []string
	for f := range reflect.TypeFor[engine.Change]().Fields() {
		if _, ok := notStored[f.Name]; f.IsExported() && !ok {
			got = append(got, f.Name)
		}
	}
	want := []string{"Name", "Target", "SpecChanged", "Delete", "Create", "Event"}
	if !slices.Equal(got, want) {
		t.Errorf("engine.Change's exported fields are %v; MarshalBatch stores %v: store the new ones (storage.proto's BatchChange)", got, want)
	}
}

// TestBatchIgnoresRevisions: the stored form does not depend on the
// revisions of the changes (the store assigns them from its transaction),
// and Marshal leaves them as they were.
func TestBatchIgnoresRevisions(t *testing.T) {
	a, b := goldenBatch(), goldenBatch()
	for i, c := range b {
		c.SetRevision(uint64(7<<10 | i))
	}
	ba, err := codec.MarshalBatch(a)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := codec.MarshalBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ba, bb) {
		t.Error("MarshalBatch differs with the revisions, want the same bytes")
	}
	if a[0].Event.Revision != 100<<10 || a[0].Target.Status.Revision != 100<<10 {
		t.Errorf("MarshalBatch changed the revisions: event %d, status %d", a[0].Event.Revision, a[0].Target.Status.Revision)
	}
}

// TestBatchSharedTarget: a change whose event carries its target decodes
// with one target, as the engine makes it, so SetRevision sets both.
func TestBatchSharedTarget(t *testing.T) {
	b, err := codec.MarshalBatch(goldenBatch())
	if err != nil {
		t.Fatal(err)
	}
	got, err := codec.UnmarshalBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		if got[i].Target == nil || got[i].Target != got[i].Event.Target {
			t.Errorf("change %d (%s): Target %p, Event.Target %p; want one pointer", i, got[i].Event.Kind, got[i].Target, got[i].Event.Target)
		}
	}
	if got[1].Target.Spec != nil {
		t.Errorf("status-only change decoded with a spec %+v, want none (it is not stored)", got[1].Target.Spec)
	}
	if got[4].Target != nil {
		t.Errorf("delete without a target decoded with %+v", got[4].Target)
	}
}

// TestBatchName: a change named otherwise than its event keeps its name.
func TestBatchName(t *testing.T) {
	c := storetest.Transition(&engine.Target{Spec: storetest.BareSpec("a"), Status: storetest.NewStatus(storetest.BareSpec("a"), storetest.Epoch)},
		probe.Readiness, probe.Success, 1, storetest.Epoch)
	c.Name = "b"
	b, err := codec.MarshalBatch([]*engine.Change{c})
	if err != nil {
		t.Fatal(err)
	}
	got, err := codec.UnmarshalBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Name != "b" || got[0].Event.Name != "a" {
		t.Errorf("decoded change %q with event %q, want b and a", got[0].Name, got[0].Event.Name)
	}
}

func TestUnmarshalBatchRefuses(t *testing.T) {
	event := &storagev1.Event{Name: "a", Kind: storagev1.EventKind_EVENT_KIND_TRANSITION}
	for _, tc := range []struct {
		name string
		m    *storagev1.Batch
		want error
	}{
		{"NoEvent", &storagev1.Batch{Changes: []*storagev1.BatchChange{{Delete: true}}}, codec.ErrMalformed},
		{"TargetTwice", &storagev1.Batch{Changes: []*storagev1.BatchChange{{
			Event: event, TargetInEvent: true, Target: &storagev1.Target{},
		}}}, codec.ErrMalformed},
		{"TargetInEventWithout", &storagev1.Batch{Changes: []*storagev1.BatchChange{{Event: event, TargetInEvent: true}}}, codec.ErrMalformed},
		{"UnknownField", withUnknown(&storagev1.Batch{}), codec.ErrNewerFormat},
		{"UnknownChangeField", &storagev1.Batch{Changes: []*storagev1.BatchChange{withUnknown(&storagev1.BatchChange{Event: event})}}, codec.ErrNewerFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := codec.UnmarshalBatch(stored(t, tc.m))
			if !errors.Is(err, tc.want) {
				t.Errorf("UnmarshalBatch = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestBatchRoundTripEmpty: an empty batch is valid (nothing to say, but a
// value).
func TestBatchRoundTripEmpty(t *testing.T) {
	b, err := codec.MarshalBatch(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := codec.UnmarshalBatch(b)
	if err != nil || len(got) != 0 {
		t.Errorf("UnmarshalBatch(MarshalBatch(nil)) = %v, %v; want no changes", got, err)
	}
}
