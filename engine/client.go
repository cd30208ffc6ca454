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

// countClientLocked adjusts the number of targets client has and returns
// the identity as the registry holds it: the string of its first target
// still registered, which later ones share instead of a copy of their
// request's each; e.mu held.
func (e *Engine) countClientLocked(client string, delta int) string {
	if client == "" {
		return ""
	}
	if n := e.perClient[client] + delta; n > 0 {
		e.perClient[client] = n
		if id, ok := e.clientIDs[client]; ok {
			return id
		}
		e.clientIDs[client] = client
	} else {
		delete(e.perClient, client)
		delete(e.clientIDs, client)
	}
	return client
}
