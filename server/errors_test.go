package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/field"
)

func TestToStatus(t *testing.T) {
	t.Parallel()
	invalid := field.List{
		field.Invalid(field.NewPath("target").Child("name"), "A", "must be lower case"),
		field.Required(field.NewPath("target").Child("readinessProbe"), "a handler"),
	}.Err()
	tests := []struct {
		name     string
		err      error
		code     codes.Code
		metadata map[string]string
		reason   string // of the ErrorInfo: the wire contract, spelled out
		fields   []string
	}{
		{name: "nil", err: nil, code: codes.OK},
		{name: "field errors", err: fmt.Errorf("create: %w", invalid), code: codes.InvalidArgument, fields: []string{"target.name", "target.readinessProbe"}},
		{name: "invalid without fields", err: fmt.Errorf("checker: %w", engine.ErrInvalid), code: codes.InvalidArgument},
		{name: "not found", err: fmt.Errorf("x: %w", engine.ErrNotFound), code: codes.NotFound},
		{name: "already exists", err: fmt.Errorf("x: %w", engine.ErrAlreadyExists), code: codes.AlreadyExists},
		{name: "failed precondition", err: fmt.Errorf("x: %w", engine.ErrFailedPrecondition), code: codes.FailedPrecondition},
		{name: "resource exhausted", err: fmt.Errorf("x: %w", engine.ErrResourceExhausted), code: codes.ResourceExhausted},
		{
			name: "compacted", err: &engine.CompactedError{Requested: 3, Oldest: 40}, code: codes.OutOfRange,
			metadata: map[string]string{"requested_revision": "3", "oldest_revision": "40"}, reason: "REVISION_COMPACTED",
		},
		{
			name: "slow watcher", err: &engine.SlowWatcherError{LastRevision: 41, Buffer: 10}, code: codes.ResourceExhausted,
			metadata: map[string]string{"last_revision": "41", "resume_revision": "42"}, reason: "WATCHER_TOO_SLOW",
		},
		{name: "closed", err: engine.ErrClosed, code: codes.Unavailable},
		{name: "ownership", err: &engine.OwnershipLostError{Names: []string{"a"}}, code: codes.Unavailable},
		{name: "store unavailable", err: fmt.Errorf("data dir /d: no space left: %w", engine.ErrUnavailable), code: codes.Unavailable},
		{name: "view suspended", err: fmt.Errorf("x: %w", engine.ErrSuspended), code: codes.Unavailable},
		// A view that cannot vouch gives no answer, whatever else its
		// error wraps (the chaos soak: a Delete answered NotFound by a
		// replica past its lease left the target in place).
		{name: "view suspended, wrapping not found", err: fmt.Errorf("%w: lease over: %w", engine.ErrSuspended, engine.ErrNotFound), code: codes.Unavailable},
		{name: "view suspended, wrapping already exists", err: fmt.Errorf("%w: %w", engine.ErrSuspended, engine.ErrAlreadyExists), code: codes.Unavailable},
		{name: "closed, wrapping failed precondition", err: fmt.Errorf("%w: %w", engine.ErrClosed, engine.ErrFailedPrecondition), code: codes.Unavailable},
		{name: "canceled", err: context.Canceled, code: codes.Canceled},
		{name: "deadline", err: context.DeadlineExceeded, code: codes.DeadlineExceeded},
		{name: "status passes through", err: status.Error(codes.PermissionDenied, "no"), code: codes.PermissionDenied},
		{name: "unknown", err: errors.New("boom"), code: codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := New(nil, Options{})
			st := status.Convert(s.toStatus(tt.err))
			if st.Code() != tt.code {
				t.Fatalf("code = %v, want %v (%v)", st.Code(), tt.code, st.Message())
			}
			var fields []string
			var reason string
			md := map[string]string{}
			for _, d := range st.Details() {
				switch d := d.(type) {
				case *errdetails.BadRequest:
					for _, v := range d.GetFieldViolations() {
						fields = append(fields, v.GetField())
						if v.GetDescription() == "" {
							t.Errorf("violation of %s has no description", v.GetField())
						}
					}
				case *errdetails.ErrorInfo:
					if d.GetDomain() != errorDomain {
						t.Errorf("ErrorInfo domain = %q", d.GetDomain())
					}
					md = d.GetMetadata()
					reason = d.GetReason()
				}
			}
			if fmt.Sprint(fields) != fmt.Sprint(tt.fields) {
				t.Errorf("field violations = %v, want %v", fields, tt.fields)
			}
			if reason != tt.reason {
				t.Errorf("ErrorInfo reason = %q, want %q", reason, tt.reason)
			}
			for k, v := range tt.metadata {
				if md[k] != v {
					t.Errorf("metadata[%s] = %q, want %q", k, md[k], v)
				}
			}
		})
	}
}

// TestInternalErrorsAreLoggedNotSent: an error toStatus does not know may
// carry the server's file paths; the client gets a generic message with
// an id, the log gets the error with the same id.
func TestInternalErrorsAreLoggedNotSent(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s := New(nil, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	err := fmt.Errorf("store: open /var/lib/probed/probed.db: %w", errors.New("input/output error"))
	st := status.Convert(s.toStatus(err))
	if st.Code() != codes.Internal {
		t.Fatalf("code = %v, want Internal", st.Code())
	}
	m := regexp.MustCompile(`^internal error ([0-9a-f]{8}): the server's log has the details$`).FindStringSubmatch(st.Message())
	if m == nil {
		t.Fatalf("message = %q, want a generic message with an id", st.Message())
	}
	if strings.Contains(st.Message(), "/var/lib") || len(st.Details()) != 0 {
		t.Errorf("the status carries the error's detail: %q %v", st.Message(), st.Details())
	}
	for _, want := range []string{"msg=\"internal error\"", "id=" + m[1], "/var/lib/probed/probed.db", "input/output error"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}
