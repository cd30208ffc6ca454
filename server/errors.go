package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/field"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// errorDomain is the domain of the ErrorInfo details probed sends.
const errorDomain = "probed.dev"

// toStatus is the one place where domain errors become gRPC statuses.
// Invalid requests carry a google.rpc.BadRequest with one field violation
// per problem; a compacted revision and a slow watcher carry an ErrorInfo
// (reasons: probev1.ErrorReason) whose metadata holds the revisions to
// resume from. An error it does not know is Internal with a generic
// message and an id; the error itself (which may name files of the
// server) is logged with that id, never sent.
func (s *Server) toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var (
		list      *field.ListError
		compacted *engine.CompactedError
		slow      *engine.SlowWatcherError
	)
	switch {
	case errors.As(err, &list):
		br := &errdetails.BadRequest{}
		for _, fe := range list.List {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
				Field:       fe.Field,
				Description: fe.Description(),
			})
		}
		return withDetails(codes.InvalidArgument, err.Error(), br)
	case errors.Is(err, engine.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &compacted):
		return withDetails(codes.OutOfRange, err.Error(), &errdetails.ErrorInfo{
			Reason: probev1.ErrorReason_REVISION_COMPACTED.String(),
			Domain: errorDomain,
			Metadata: map[string]string{
				"requested_revision": strconv.FormatUint(compacted.Requested, 10),
				"oldest_revision":    strconv.FormatUint(compacted.Oldest, 10),
			},
		})
	case errors.As(err, &slow):
		return withDetails(codes.ResourceExhausted, err.Error(), &errdetails.ErrorInfo{
			Reason: probev1.ErrorReason_WATCHER_TOO_SLOW.String(),
			Domain: errorDomain,
			Metadata: map[string]string{
				"last_revision":   strconv.FormatUint(slow.LastRevision, 10),
				"resume_revision": strconv.FormatUint(slow.LastRevision+1, 10),
			},
		})
	// A replica that cannot vouch for its view, or is shutting down,
	// gives no answer about a target, whatever its error also wraps: a
	// NotFound or AlreadyExists from such a view may be false (a client
	// that deletes takes NotFound as done).
	case errors.Is(err, engine.ErrSuspended):
		// This replica cannot vouch for its view (cluster mode, lease
		// lost): another replica can answer.
		return unavailable(err.Error())
	case errors.Is(err, engine.ErrClosed):
		return status.Error(codes.Unavailable, "probed is shutting down: "+err.Error())
	case errors.Is(err, engine.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, engine.ErrAlreadyExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, engine.ErrFailedPrecondition):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, engine.ErrResourceExhausted):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, engine.ErrAborted):
		// An apply whose lock this replica lost (its lease expired):
		// another replica finishes it; the call may be made again.
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, engine.ErrUnavailable):
		// The store cannot write for now (a full disk): the message names
		// the data dir and the cause, for the operator who must act.
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, engine.ErrOwnershipLost), errors.Is(err, engine.ErrNotOwned):
		// The target's owner is changing (or lives elsewhere and the call
		// cannot be forwarded): the same call succeeds a moment later.
		return unavailable(err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	default:
		id := fmt.Sprintf("%08x", rand.Uint32())
		s.opts.Logger.Error("internal error", "id", id, "err", err)
		return status.Error(codes.Internal, "internal error "+id+": the server's log has the details")
	}
}

func withDetails(code codes.Code, msg string, detail protoadapt.MessageV1) error {
	st, err := status.New(code, msg).WithDetails(detail)
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}
