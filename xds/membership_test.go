package xds_test

import (
	"testing"

	"github.com/probed/probed/xds"
)

func TestServiceName(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		labels       map[string]string
		want         string
		ok           bool
	}{
		{"namespaced", "team-a/web-0", map[string]string{xds.LabelService: "web"}, "web.team-a", true},
		{"no namespace", "web-0", map[string]string{xds.LabelService: "web"}, "web", true},
		{"no label", "team-a/web-0", map[string]string{"app": "web"}, "", true},
		{"a dot in the label", "team-a/web-0", map[string]string{xds.LabelService: "web.v2"}, "", false},
		{"upper case", "team-a/web-0", map[string]string{xds.LabelService: "Web"}, "", false},
		{"empty label", "team-a/web-0", map[string]string{xds.LabelService: ""}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := xds.ServiceName(tc.target, tc.labels)
			if got != tc.want || ok != tc.ok {
				t.Errorf("ServiceName(%q, %v) = %q, %v; want %q, %v", tc.target, tc.labels, got, ok, tc.want, tc.ok)
			}
		})
	}
}
