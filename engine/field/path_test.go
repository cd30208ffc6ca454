package field_test

import (
	"testing"

	"github.com/probed/probed/engine/field"
)

func TestPathString(t *testing.T) {
	t.Parallel()
	root := field.NewPath("target")
	tests := []struct {
		name string
		path *field.Path
		want string
	}{
		{"root", root, "target"},
		{"child", root.Child("readinessProbe").Child("periodMilliseconds"), "target.readinessProbe.periodMilliseconds"},
		{"index", root.Child("readinessProbe").Child("httpGet").Child("httpHeaders").Index(2).Child("name"), "target.readinessProbe.httpGet.httpHeaders[2].name"},
		{"key", root.Child("labels").Key("app"), "target.labels[app]"},
		{"nil parent child", (*field.Path)(nil).Child("name"), "name"},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.path.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}
