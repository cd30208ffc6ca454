package target_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/probed/probed/engine/target"
)

func namesN(n, length int) []string {
	out := make([]string, n)
	for i := range out {
		s := "n" + strconv.Itoa(i)
		out[i] = s + strings.Repeat("x", max(length-len(s), 0))
	}
	return out
}

func labelsN(n int, value string) map[string]string {
	out := make(map[string]string, n)
	for i := range n {
		out["example.com/"+strings.Repeat("k", 50)+strconv.Itoa(i)] = value
	}
	return out
}

func TestValidateSelection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		names  []string
		labels map[string]string
		want   []wantErr // in order
	}{
		{name: "empty"},
		{name: "the largest", names: namesN(target.MaxSelectionNames, 20), labels: labelsN(target.MaxLabels, strings.Repeat("v", 63))},
		{name: "too many names", names: namesN(target.MaxSelectionNames+1, 5), want: []wantErr{{"names", "at most 1000 names"}}},
		{name: "20,000 names", names: namesN(20000, 5), want: []wantErr{{"names", "at most 1000 names"}}},
		{name: "a bad name", names: []string{"ok", "Not_OK"}, want: []wantErr{{"names[1]", "DNS-1123"}}},
		{name: "too many labels", labels: labelsN(target.MaxLabels+1, ""), want: []wantErr{{"labelSelector", "at most 64 labels"}}},
		{name: "20,000 labels", labels: labelsN(20000, "v"), want: []wantErr{{"labelSelector", "at most 64 labels"}}},
		{name: "a bad label", labels: map[string]string{"a": "-"}, want: []wantErr{{"labelSelector[a]", "label value"}}},
		{name: "too many bytes", names: namesN(target.MaxSelectionNames, 63), labels: labelsN(target.MaxLabels, strings.Repeat("v", 63)),
			want: []wantErr{{"labelSelector", "at most 65536 bytes"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := target.ValidateSelection(tt.names, tt.labels)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors (%v), want %d", len(errs), errs.Err(), len(tt.want))
			}
			for i, w := range tt.want {
				if errs[i].Field != w.field || !strings.Contains(errs[i].Error(), w.contains) {
					t.Errorf("error %d = %q at %q, want at %q containing %q", i, errs[i].Error(), errs[i].Field, w.field, w.contains)
				}
			}
		})
	}
}
