package engine

import "context"

type ownerKey struct{}

// WithOwner returns a context saying which client identity a request comes
// from (the server sets it from the authenticated caller). The engine
// records it as the owner of the targets that request creates and enforces
// Options.MaxTargetsPerOwner.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the identity WithOwner put in ctx, or "".
func OwnerFrom(ctx context.Context) string {
	s, _ := ctx.Value(ownerKey{}).(string)
	return s
}

// countOwnedLocked adjusts the number of targets owner has; e.mu held.
func (e *Engine) countOwnedLocked(owner string, delta int) {
	if owner == "" {
		return
	}
	if n := e.owned[owner] + delta; n > 0 {
		e.owned[owner] = n
	} else {
		delete(e.owned, owner)
	}
}
