package field_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/probed/probed/engine/field"
)

func TestErrorDescription(t *testing.T) {
	t.Parallel()
	p := field.NewPath("target").Child("name")
	tests := []struct {
		name     string
		err      *field.Error
		wantDesc string
		wantErr  string
	}{
		{"invalid int", field.Invalid(p, 1000, "must be less than 1000"), "Invalid value: 1000: must be less than 1000", "target.name: Invalid value: 1000: must be less than 1000"},
		{"invalid string is quoted", field.Invalid(p, "A_b", "must be lower case"), `Invalid value: "A_b": must be lower case`, `target.name: Invalid value: "A_b": must be lower case`},
		{"required", field.Required(p, "a name is required"), "Required value: a name is required", "target.name: Required value: a name is required"},
		{"forbidden", field.Forbidden(p, "disabled"), "Forbidden: disabled", "target.name: Forbidden: disabled"},
		{"too long", field.TooLong(p, 63), "Too long: must have at most 63 bytes", "target.name: Too long: must have at most 63 bytes"},
		{
			"control characters escaped", field.Invalid(p, "\x1b]0;pwned\a\x1b[2J\xff", "bad"),
			`Invalid value: "\x1b]0;pwned\a\x1b[2J\xff": bad`, `target.name: Invalid value: "\x1b]0;pwned\a\x1b[2J\xff": bad`,
		},
		{
			"a long value clipped", field.Invalid(p, strings.Repeat("é", 100), "bad"),
			`Invalid value: "` + strings.Repeat("é", 64) + `"... (200 bytes): bad`, `target.name: Invalid value: "` + strings.Repeat("é", 64) + `"... (200 bytes): bad`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Description(); got != tt.wantDesc {
				t.Errorf("Description() = %q, want %q", got, tt.wantDesc)
			}
			if got := tt.err.Error(); got != tt.wantErr {
				t.Errorf("Error() = %q, want %q", got, tt.wantErr)
			}
		})
	}
}

func TestListErr(t *testing.T) {
	t.Parallel()
	if err := (field.List{}).Err(); err != nil {
		t.Fatalf("empty list Err() = %v, want nil", err)
	}
	l := field.List{field.Required(field.NewPath("a"), ""), field.Invalid(field.NewPath("b"), -1, "must be non-negative")}
	err := l.Err()
	if !errors.Is(err, field.ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false, want true")
	}
	var le *field.ListError
	if !errors.As(err, &le) || len(le.List) != 2 {
		t.Fatalf("errors.As(*ListError) did not give the two errors: %v", err)
	}
	if want := "a: Required value; b: Invalid value: -1: must be non-negative"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

// TestListErrCapped: a request with thousands of bad fields gets the first
// MaxErrors errors, the last saying how many more there were, not an error
// larger than the request.
func TestListErrCapped(t *testing.T) {
	t.Parallel()
	var l field.List
	for i := range 5000 {
		l = append(l, field.Invalid(field.NewPath("target").Child("labels").Key(fmt.Sprint("-", i)), strings.Repeat("v", 4096), "bad"))
	}
	var le *field.ListError
	if !errors.As(l.Err(), &le) || len(le.List) != field.MaxErrors {
		t.Fatalf("Err() kept %d errors, want %d", len(le.List), field.MaxErrors)
	}
	last := le.List[field.MaxErrors-1]
	if want := "target.labels[-99]: Too many errors: 4901 more errors not shown (at most 100 are reported)"; last.Error() != want {
		t.Errorf("last error %q, want %q", last.Error(), want)
	}
	if n := len(l.Err().Error()); n > 32<<10 {
		t.Errorf("the error of 5000 bad 4 KiB values is %d bytes", n)
	}
	if len(l) != 5000 {
		t.Errorf("Err() changed the list: %d errors left", len(l))
	}
}
