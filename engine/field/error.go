package field

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
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
	TypeTooMany   Type = "Too many errors"
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

// MaxEchoBytes bounds how much of a value (or a map key) an error quotes:
// a request may be large, and its errors are sent back, logged and shown
// in terminals.
const MaxEchoBytes = 128

// MaxErrors bounds how many errors a List reports (Err): the first ones,
// then one saying how many more there were.
const MaxErrors = 100

// quote renders s for an error: quoted with Go's escapes for control
// characters and invalid UTF-8, and clipped to MaxEchoBytes with its full
// length noted.
func quote(s string) string {
	if len(s) <= MaxEchoBytes {
		return strconv.Quote(s)
	}
	n := MaxEchoBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:n]), len(s))
}

func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		return quote(v)
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
//
// At most MaxErrors errors are kept: beyond them, the last one kept says
// how many more there were (at the field of the first one left out).
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	if len(l) > MaxErrors {
		more := &Error{Type: TypeTooMany, Field: l[MaxErrors-1].Field,
			Detail: fmt.Sprintf("%d more errors not shown (at most %d are reported)", len(l)-MaxErrors+1, MaxErrors)}
		l = append(l[:MaxErrors-1:MaxErrors-1], more)
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
