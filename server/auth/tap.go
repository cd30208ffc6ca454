package auth

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// InHandle decides from a call's headers alone, in the connection's
// reading goroutine, whether the call may start: a call without valid
// credentials ends there with Unauthenticated, before grpc-go starts a
// handler goroutine for it or reads its message (so streams opened without
// credentials and never given a body hold nothing). The interceptors check
// again, and apply the rate limits. admitted, when not nil, is called with
// the context of each call let through (its peer, its identity not yet
// set); install the result with grpc.InTapHandle.
func (a *Authenticator) InHandle(admitted func(ctx context.Context)) func(ctx context.Context, info *tap.Info) (context.Context, error) {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if !a.opts.OpenHealth || !strings.HasPrefix(info.FullMethodName, healthPrefix) {
			if _, err := a.authenticate(ctx); err != nil {
				return nil, status.Error(codes.Unauthenticated, err.Error())
			}
		}
		if admitted != nil {
			admitted(ctx)
		}
		return ctx, nil
	}
}
