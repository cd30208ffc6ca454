package field_test

import (
	"strings"
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
		{"qualified key", root.Child("labels").Key("example.com/app_1-x"), "target.labels[example.com/app_1-x]"},
		{"key with escape sequences", root.Child("labels").Key("\x1b[31mred"), `target.labels["\x1b[31mred"]`},
		{"key with brackets", root.Child("labels").Key("a][b"), `target.labels["a][b"]`},
		{"empty key", root.Child("labels").Key(""), `target.labels[""]`},
		{"long key", root.Child("labels").Key(strings.Repeat("k", 200)), `target.labels["` + strings.Repeat("k", 128) + `"... (200 bytes)]`},
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
