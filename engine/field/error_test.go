package field_test

import (
	"errors"
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
