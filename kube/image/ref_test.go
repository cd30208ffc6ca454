package image_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probed/probed/kube/image"
)

func TestChartRef(t *testing.T) {
	tests := []struct {
		name, chart, values string
		want, wantErr       string
	}{
		{name: "appVersion", chart: `appVersion: "dev"`, values: "image:\n  repository: probed\n  tag: \"\"\n", want: "probed:dev"},
		{name: "unquoted appVersion", chart: "appVersion: v0.3.0", values: "image: {repository: registry.example/team/probed}", want: "registry.example/team/probed:v0.3.0"},
		{name: "tag wins", chart: `appVersion: "dev"`, values: "image: {repository: probed, tag: v1}", want: "probed:v1"},
		{name: "digest", chart: `appVersion: "dev"`, values: "image: {repository: probed, digest: 'sha256:00'}", wantErr: "image.digest"},
		{name: "no repository", chart: `appVersion: "dev"`, values: "image: {tag: v1}", wantErr: "no image.repository"},
		{name: "no version", chart: "name: probed", values: "image: {repository: probed}", wantErr: "neither image.tag nor appVersion"},
		{name: "bad tag", chart: `appVersion: "not a tag"`, values: "image: {repository: probed}", wantErr: "the default image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for f, data := range map[string]string{"Chart.yaml": tt.chart, "values.yaml": tt.values} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := image.ChartRef(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ChartRef = %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ChartRef = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
