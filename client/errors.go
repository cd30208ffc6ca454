package client

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Every error a call returns for a gRPC status with one of
// these codes wraps the matching sentinel (check with errors.Is) and keeps
// the status (status.FromError and status.Code still work on it).
var (
	// ErrNotFound: no target (or probe) by that name. InvalidArgument is
	// never ErrNotFound.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a target by that name exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrInvalid: the request is invalid; errors.As(err, **InvalidError)
	// gives every field violation.
	ErrInvalid = errors.New("invalid argument")
	// ErrFailedPrecondition: the target's state does not allow the call
	// (e.g. updating a terminating target).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrUnavailable: the server cannot be reached or is shutting down.
	ErrUnavailable = errors.New("unavailable")
	// ErrResourceExhausted: a server limit was reached.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrCompacted: a watch asked for a revision older than the retained
	// history. Watch handles it itself by starting over with a snapshot.
	ErrCompacted = errors.New("revision compacted")
	// ErrUnauthenticated: the call carried no valid credentials.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied: the caller may not make the call.
	ErrPermissionDenied = errors.New("permission denied")
)

// sentinels maps status codes to the sentinel their errors wrap. Canceled
// and DeadlineExceeded wrap the context errors, so a timeout is
// errors.Is(err, context.DeadlineExceeded) whichever side noticed it.
var sentinels = map[codes.Code]error{
	codes.NotFound:           ErrNotFound,
	codes.AlreadyExists:      ErrAlreadyExists,
	codes.InvalidArgument:    ErrInvalid,
	codes.FailedPrecondition: ErrFailedPrecondition,
	codes.Unavailable:        ErrUnavailable,
	codes.ResourceExhausted:  ErrResourceExhausted,
	codes.OutOfRange:         ErrCompacted,
	codes.Unauthenticated:    ErrUnauthenticated,
	codes.PermissionDenied:   ErrPermissionDenied,
	codes.Canceled:           context.Canceled,
	codes.DeadlineExceeded:   context.DeadlineExceeded,
}

// StatusError is the error of a call that failed with a gRPC status: its
// message is the server's, it unwraps to the sentinel of its code, and
// GRPCStatus returns the status with its details.
type StatusError struct {
	kind   error
	status *status.Status
}

// Error returns the server's message, e.g. `target "web": not found`.
func (e *StatusError) Error() string { return e.status.Message() }

// Unwrap returns the sentinel, e.g. ErrNotFound.
func (e *StatusError) Unwrap() error { return e.kind }

// GRPCStatus returns the status the server sent.
func (e *StatusError) GRPCStatus() *status.Status { return e.status }

// FieldViolation is one problem with one field of a request.
type FieldViolation struct {
	// Field is the JSON path, e.g. "target.readinessProbe.periodMilliseconds".
	Field string
	// Description is the rule and the value, e.g. "Invalid value: 1000:
	// must be greater than -1000 and less than 1000".
	Description string
}

// InvalidError is the error of a call the server rejected as invalid
// (InvalidArgument). It unwraps to ErrInvalid.
type InvalidError struct {
	// Violations come from the status' google.rpc.BadRequest, in the
	// server's order; empty when the server sent none.
	Violations []FieldViolation
	status     *status.Status
}

// Error prints every violation on its own line:
//
//	invalid argument:
//	  target.name: Required value: a target name is required
func (e *InvalidError) Error() string {
	if len(e.Violations) == 0 {
		return "invalid argument: " + e.status.Message()
	}
	var b strings.Builder
	b.WriteString("invalid argument:")
	for _, v := range e.Violations {
		b.WriteString("\n  ")
		b.WriteString(v.Field)
		b.WriteString(": ")
		b.WriteString(v.Description)
	}
	return b.String()
}

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// GRPCStatus returns the status the server sent.
func (e *InvalidError) GRPCStatus() *status.Status { return e.status }

// fromStatus is the one place where gRPC statuses become client errors.
// Errors that carry no status, and codes with no sentinel, are returned
// unchanged.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	var (
		se *StatusError
		ie *InvalidError
	)
	if errors.As(err, &se) || errors.As(err, &ie) {
		return err // already converted
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if st.Code() == codes.InvalidArgument {
		ie := &InvalidError{status: st}
		for _, d := range st.Details() {
			br, ok := d.(*errdetails.BadRequest)
			if !ok {
				continue
			}
			for _, v := range br.GetFieldViolations() {
				ie.Violations = append(ie.Violations, FieldViolation{Field: v.GetField(), Description: v.GetDescription()})
			}
		}
		return ie
	}
	kind, ok := sentinels[st.Code()]
	if !ok {
		return err
	}
	return &StatusError{kind: kind, status: st}
}

// errorReason returns the reason of the status' google.rpc.ErrorInfo, or
// "" when it has none.
func errorReason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
