package main

import (
	"context"
	"strconv"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// violatedFields returns the code of err and the fields of its BadRequest.
func violatedFields(err error) (codes.Code, []string) {
	st := status.Convert(err)
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	return st.Code(), fields
}

// hugeSelection is issue 21's attack: 20,000 labels and 20,000 names,
// though a target carries at most 64 labels.
func hugeSelection() ([]string, map[string]string) {
	names := make([]string, 20_000)
	labels := make(map[string]string, 20_000)
	for i := range names {
		names[i] = "n" + strconv.Itoa(i)
		labels["l"+strconv.Itoa(i)] = "v"
	}
	return names, labels
}

// TestWatchSelectorsAreBounded: a Watch (or ListTargets) whose selection
// is larger than any target can match is InvalidArgument naming the
// field, and holds nothing. Before, 200 streams with 20,000 labels and
// 20,000 names each held 930 MB of heap. Not parallel: it measures the
// heap.
func TestWatchSelectorsAreBounded(t *testing.T) {
	addr := startServer(t, testConfig(t))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	svc := probev1.NewProbeServiceClient(conn)
	names, labels := hugeSelection()
	kinds := make([]probev1.EventKind, 9)
	for i := range kinds {
		kinds[i] = probev1.EventKind_EVENT_KIND_TRANSITION
	}

	firstRecv := func(req *probev1.WatchRequest) error {
		ctx, cancel := context.WithCancel(callCtx(t))
		defer cancel()
		s, err := svc.Watch(ctx, req)
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	tests := []struct {
		name  string
		call  func() error
		field string
	}{
		{name: "watch names", call: func() error { return firstRecv(&probev1.WatchRequest{Names: names}) }, field: "names"},
		{name: "watch labels", call: func() error { return firstRecv(&probev1.WatchRequest{LabelSelector: labels}) }, field: "labelSelector"},
		{name: "watch kinds", call: func() error { return firstRecv(&probev1.WatchRequest{Kinds: kinds}) }, field: "kinds"},
		{name: "list labels", call: func() error {
			_, err := svc.ListTargets(callCtx(t), &probev1.ListTargetsRequest{LabelSelector: labels})
			return err
		}, field: "labelSelector"},
	}
	for _, tt := range tests {
		code, fields := violatedFields(tt.call())
		if code != codes.InvalidArgument || len(fields) != 1 || fields[0] != tt.field {
			t.Errorf("%s: %v %q, want InvalidArgument at %q", tt.name, code, fields, tt.field)
		}
	}

	// Streams that stay open (the client never cancels) with the attack's
	// selection hold nothing.
	base := heapInUse()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const streams = 20
	refused := 0
	req := &probev1.WatchRequest{Names: names, LabelSelector: labels}
	for range streams {
		s, err := svc.Watch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); status.Code(err) == codes.InvalidArgument {
			refused++
		}
	}
	if refused != streams {
		t.Errorf("%d of %d watches with 20,000 names and labels refused, want all", refused, streams)
	}
	grown := int64(heapInUse()) - int64(base)
	t.Logf("%d watches of 20,000 names and labels: %+d KiB heap", streams, grown>>10)
	if grown > 16<<20 {
		t.Errorf("the heap grew by %d KiB, want at most 16 MiB", grown>>10)
	}
}
