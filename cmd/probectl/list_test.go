package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestListCommand(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	for _, tg := range []*probev1.Target{
		{Name: "c", Labels: map[string]string{"team": "x"}},
		{Name: "a", Labels: map[string]string{"team": "x", "tier": "db"}},
		{Name: "b", Labels: map[string]string{"team": "y"}},
	} {
		mustCreate(t, c, tg)
	}

	tests := []struct {
		name  string
		args  []string
		names []string
	}{
		{"all", nil, []string{"a", "b", "c"}},
		{"one label", []string{"-l", "team=x"}, []string{"a", "c"}},
		{"two labels", []string{"-l", "team=x,tier=db"}, []string{"a"}},
		{"none", []string{"-l", "team=z"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := probectl(ctx, s.Addr, "", append([]string{"list"}, tt.args...)...)
			if r.code != 0 {
				t.Fatalf("code %d, stderr %q", r.code, r.err)
			}
			rows := tableRows(r.out)
			var names []string
			for _, row := range rows[1:] {
				names = append(names, row[0])
				if diff := cmp.Diff([]string{"Active", "true", "true", "true", "-", "-", "-"}, row[1:8]); diff != "" {
					t.Errorf("row %s (-want +got):\n%s", row[0], diff)
				}
			}
			if diff := cmp.Diff(tt.names, names); diff != "" {
				t.Errorf("listed names (-want +got):\n%s", diff)
			}

			r = probectl(ctx, s.Addr, "", append([]string{"list", "-o", "json"}, tt.args...)...)
			var resp probev1.ListTargetsResponse
			if r.code != 0 || unmarshalJSON(r.out, &resp) != nil {
				t.Fatalf("json: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
			}
			names = nil
			for _, tg := range resp.GetTargets() {
				names = append(names, tg.GetName())
			}
			if diff := cmp.Diff(tt.names, names); diff != "" {
				t.Errorf("json names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSelector(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{"", nil, false},
		{"a=1", map[string]string{"a": "1"}, false},
		{"a=1, b=", map[string]string{"a": "1", "b": ""}, false},
		{"a", nil, true},
		{"=1", nil, true},
		{"a=1,a=2", nil, true},
	}
	for _, tt := range tests {
		got, err := parseSelector(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseSelector(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseSelector(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}
