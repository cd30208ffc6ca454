package engine

import "context"

type clientKey struct{}

// WithClient returns a context saying which client identity a request
// comes from (the server sets it from the authenticated caller). The
// engine records it as the client of the targets that request creates
// (Status.Client) and enforces Options.MaxTargetsPerClient.
func WithClient(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, clientKey{}, id)
}

// ClientFrom returns the identity WithClient put in ctx, or "".
func ClientFrom(ctx context.Context) string {
	s, _ := ctx.Value(clientKey{}).(string)
	return s
}

// countClientLocked adjusts the number of targets client has; e.mu held.
func (e *Engine) countClientLocked(client string, delta int) {
	if client == "" {
		return
	}
	if n := e.perClient[client] + delta; n > 0 {
		e.perClient[client] = n
	} else {
		delete(e.perClient, client)
	}
}
