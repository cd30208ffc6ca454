package target

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/probed/probed/engine/feature"
	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/probe"
)

// Options are the server-wide settings validation depends on.
type Options struct {
	Gates      feature.Gates
	MinPeriod  time.Duration
	MinTimeout time.Duration
	AllowExec  bool
}

// Limits on names and labels. A name is a DNS-1123 label of at most
// MaxLabelNameBytes, or NAMESPACE/NAME: a DNS-1123 label of at most
// MaxNamespaceBytes, '/', and a DNS-1123 subdomain of at most
// MaxSubdomainBytes (a Kubernetes pod name), MaxNameBytes in all.
const (
	MaxLabelNameBytes  = 63
	MaxNamespaceBytes  = 63
	MaxSubdomainBytes  = 253
	MaxNameBytes       = MaxNamespaceBytes + 1 + MaxSubdomainBytes
	MaxLabels          = 64
	MaxLabelValueBytes = 63
	maxLabelNameBytes  = 63
	maxLabelPrefix     = 253
)

var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	qualifiedName    = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
)

// Validate reports every problem with spec at once, each at its JSON path
// under "target". old is the stored target on an update and nil on a
// create: it makes the checks ratchet (KEP-4818) so that a value the stored
// target already uses stays valid when its gate is off — the *Milliseconds
// fields for SubSecondProbes, a preStop sleep of 0 for
// PodLifecycleSleepActionAllowZero. As in Kubernetes, the check is per
// target, not per field.
func Validate(spec, old *Spec, opts Options) field.List {
	root := field.NewPath("target")
	var errs field.List
	errs = append(errs, ValidateName(root.Child("name"), spec.Name)...)
	errs = append(errs, validateLabels(root.Child("labels"), spec.Labels)...)

	probeOpts := probe.Options{
		MinPeriod:       opts.MinPeriod,
		MinTimeout:      opts.MinTimeout,
		SubSecondProbes: opts.Gates.Enabled(feature.SubSecondProbes) || old.UsesMilliseconds(),
		AllowExec:       opts.AllowExec,
	}
	for _, t := range probe.Types {
		if p := spec.Probe(t); p != nil {
			errs = append(errs, p.Validate(t, root.Child(t.Field()), probeOpts)...)
		}
	}

	grace := root.Child("terminationGracePeriodSeconds")
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(grace, *g, "must be greater than or equal to 0"))
	}
	allowZero := opts.Gates.Enabled(feature.PodLifecycleSleepActionAllowZero) || old.UsesZeroSleep()
	errs = append(errs, spec.validateLifecycle(root.Child("lifecycle"), allowZero)...)
	return errs
}

func (s *Spec) validateLifecycle(path *field.Path, allowZero bool) field.List {
	if s.Lifecycle == nil || s.Lifecycle.PreStop == nil {
		return nil
	}
	preStop := path.Child("preStop")
	sleep := s.Lifecycle.PreStop.Sleep
	if sleep == nil {
		return field.List{field.Required(preStop, "must specify a handler type: sleep")}
	}
	grace := s.gracePeriodSeconds()
	p := preStop.Child("sleep").Child("seconds")
	// KEP-4818's validateSleepAction, with its texts; the gate is named as
	// it is actually called.
	if allowZero {
		if sleep.Seconds < 0 || sleep.Seconds > grace {
			return field.List{field.Invalid(p, sleep.Seconds, fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", grace))}
		}
		return nil
	}
	if sleep.Seconds <= 0 || sleep.Seconds > grace {
		return field.List{field.Invalid(p, sleep.Seconds, fmt.Sprintf(
			"must be greater than 0 and less than terminationGracePeriodSeconds (%d). Please enable %s feature gate if you need a sleep of zero duration.",
			grace, feature.PodLifecycleSleepActionAllowZero))}
	}
	return nil
}

// ValidateName checks a target name: a DNS-1123 label (lower-case
// alphanumerics and '-', starting and ending with an alphanumeric) of at
// most 63 characters, or a namespaced name NAMESPACE/NAME, NAMESPACE such
// a label and NAME a DNS-1123 subdomain (labels joined by '.') of at most
// 253 characters.
func ValidateName(path *field.Path, name string) field.List {
	if name == "" {
		return field.List{field.Required(path, "a name is required")}
	}
	ns, local, namespaced := strings.Cut(name, "/")
	if !namespaced {
		return validateLabelName(path, name, MaxLabelNameBytes)
	}
	switch {
	case len(name) > MaxNameBytes:
		return field.List{field.TooLong(path, MaxNameBytes)}
	case ns == "" || len(ns) > MaxNamespaceBytes || !dns1123Label.MatchString(ns):
		return field.List{field.Invalid(path, name, "the namespace of a NAMESPACE/NAME name must be a DNS-1123 label: at most 63 lower case alphanumeric characters or '-', starting and ending with an alphanumeric character (e.g. 'team-a/web')")}
	case local == "" || len(local) > MaxSubdomainBytes || !dns1123Subdomain.MatchString(local):
		return field.List{field.Invalid(path, name, "the NAME of a NAMESPACE/NAME name must be a DNS-1123 subdomain: at most 253 lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character (e.g. 'team-a/web-0.eu')")}
	}
	return nil
}

func validateLabelName(path *field.Path, name string, limit int) field.List {
	switch {
	case len(name) > limit:
		return field.List{field.TooLong(path, limit)}
	case !dns1123Label.MatchString(name):
		return field.List{field.Invalid(path, name, "a DNS-1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name' or '123-abc'), optionally after a namespace and '/' (e.g. 'team-a/web-0.eu')")}
	}
	return nil
}

// Namespace returns the namespace of a name ("" for a name without one).
func Namespace(name string) string {
	ns, _, ok := strings.Cut(name, "/")
	if !ok {
		return ""
	}
	return ns
}

func validateLabels(path *field.Path, labels map[string]string) field.List {
	var errs field.List
	if len(labels) > MaxLabels {
		errs = append(errs, field.Invalid(path, len(labels), fmt.Sprintf("must have at most %d labels", MaxLabels)))
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		errs = append(errs, ValidateLabel(path.Key(k), k, labels[k])...)
	}
	return errs
}

// ValidateLabel checks one label as Kubernetes does: the key is a
// qualified name with an optional DNS subdomain prefix ("example.com/app"),
// the value is empty or a name of at most 63 characters.
func ValidateLabel(path *field.Path, key, value string) field.List {
	var errs field.List
	name := key
	if prefix, n, ok := strings.Cut(key, "/"); ok {
		name = n
		if prefix == "" || len(prefix) > maxLabelPrefix || !dns1123Subdomain.MatchString(prefix) {
			errs = append(errs, field.Invalid(path, key, "the prefix of a label key must be a DNS subdomain (e.g. 'example.com')"))
		}
	}
	if len(name) > maxLabelNameBytes || !qualifiedName.MatchString(name) {
		errs = append(errs, field.Invalid(path, key, "a label key must be at most 63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character, with an optional DNS subdomain prefix and '/'"))
	}
	if value != "" && (len(value) > MaxLabelValueBytes || !qualifiedName.MatchString(value)) {
		errs = append(errs, field.Invalid(path, value, "a label value must be empty or at most 63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character"))
	}
	return errs
}
