package podtarget

import (
	"strings"

	"github.com/probed/probed/engine/target"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
)

// validation is what probed's validation runs with here: the loosest
// settings a probed server may have (no floor on periods and timeouts,
// feature gates at their defaults). What a server's own settings refuse
// beyond that (a period under its --min-period) the server refuses, and
// the controller isolates the pod the same way.
var validation = target.Options{}

// validate checks t with probed's own rules (the engine's, through the
// server's conversion of the API), each error at the pod's field.
func validate(t *probev1.Target) []FieldError {
	var errs []FieldError
	for _, fe := range target.Validate(server.Spec(t), nil, validation) {
		errs = append(errs, FieldError{Field: PodField(strings.TrimPrefix(fe.Field, "target")), Detail: fe.Description()})
	}
	return errs
}

// PodField names the field of a pod that a field of its target comes
// from: a probe's (".readinessProbe.httpGet.port") is the annotation's,
// the labels are the pod's metadata. field is the target's path without
// its root, starting with "." or "[".
func PodField(field string) string {
	switch {
	case strings.HasPrefix(field, ".labels"):
		return "metadata" + field
	case strings.HasPrefix(field, ".name"):
		return "metadata.name"
	}
	return annotationPath + field
}
