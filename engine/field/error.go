package field

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every error made from a non-empty List.
var ErrInvalid = errors.New("invalid argument")

// Type classifies a validation error.
type Type string

// The kinds of validation error, worded as Kubernetes words them.
const (
	TypeInvalid   Type = "Invalid value"
	TypeRequired  Type = "Required value"
	TypeForbidden Type = "Forbidden"
	TypeTooLong   Type = "Too long"
	TypeNotFound  Type = "Not found"
)

// Error is one problem with one field.
type Error struct {
	Type   Type
	Field  string // JSON path
	Value  any    // the offending value, shown for TypeInvalid
	Detail string // the rule that was broken
}

// Error renders "field: Type: value: detail".
func (e *Error) Error() string {
	return e.Field + ": " + e.Description()
}

// Description is the message without the field path: the rule and the value.
func (e *Error) Description() string {
	var b strings.Builder
	b.WriteString(string(e.Type))
	if e.Type == TypeInvalid {
		fmt.Fprintf(&b, ": %s", formatValue(e.Value))
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case nil:
		return "null"
	default:
		return fmt.Sprint(v)
	}
}

// Invalid reports a value that breaks the rule in detail.
func Invalid(p *Path, value any, detail string) *Error {
	return &Error{Type: TypeInvalid, Field: p.String(), Value: value, Detail: detail}
}

// Required reports a missing value.
func Required(p *Path, detail string) *Error {
	return &Error{Type: TypeRequired, Field: p.String(), Detail: detail}
}

// Forbidden reports a field that may not be set in this context.
func Forbidden(p *Path, detail string) *Error {
	return &Error{Type: TypeForbidden, Field: p.String(), Detail: detail}
}

// TooLong reports a value longer than max.
func TooLong(p *Path, max int) *Error {
	return &Error{Type: TypeTooLong, Field: p.String(), Detail: fmt.Sprintf("must have at most %d bytes", max)}
}

// List collects every problem found in one object.
type List []*Error

// Err returns nil for an empty list and otherwise an error that wraps
// ErrInvalid and can be unwrapped to the list with errors.As(err, *List).
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	return &ListError{List: l}
}

// ListError is the error form of a non-empty List.
type ListError struct {
	List List
}

// Error joins every problem, one per line.
func (e *ListError) Error() string {
	msgs := make([]string, len(e.List))
	for i, fe := range e.List {
		msgs[i] = fe.Error()
	}
	return strings.Join(msgs, "; ")
}

// Is reports ErrInvalid.
func (e *ListError) Is(target error) bool { return target == ErrInvalid }
