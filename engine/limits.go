package engine

// A LimitedStore is a SharedStore that enforces the engine's target
// limits (Options.MaxTargets, Options.MaxTargetsPerClient) for every
// replica at once (issue 33): it counts the stored targets, in total and
// per client (Status.Client), in the same transaction as each create and
// each removal, and refuses a create that would pass a limit — a reason
// wrapping ErrResourceExhausted in its *ConflictError — whatever the other
// replicas admit meanwhile. Open tells it the limits before Load (0: no
// limit). The engine still checks its own view first (checkRoomLocked),
// which spares the store a create that is refused anyway; the store is
// what makes the limits exact across replicas.
type LimitedStore interface {
	SharedStore
	EnforceLimits(total, perClient int)
}
