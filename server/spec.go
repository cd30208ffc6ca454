package server

import (
	"github.com/probed/probed/engine/target"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Spec converts a target of the API into the engine's spec, as every call
// does before the engine validates it: a program that builds targets
// (probed-kube) checks them with probed's own rules (target.Validate,
// whose field paths are the API's JSON paths under "target") before it
// sends them. The status and owner are ignored.
func Spec(t *probev1.Target) *target.Spec { return toSpec(t) }
