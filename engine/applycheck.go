package engine

import (
	"fmt"

	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/target"
)

// SetCheck checks the desired targets of one Apply set one at a time, as
// a caller that receives the set in pieces gets them (the server reads an
// ApplyTargets stream), with the checks Apply makes: at most
// MaxApplyTargets, unique names, the selector's labels, and each target's
// validation (against the published spec of its name, for ratcheting).
// A bad target is refused before the rest is read; Apply checks the
// whole set again, against the targets as they are then. Not safe for
// concurrent use.
type SetCheck struct {
	e        *Engine
	selector map[string]string
	seen     map[string]int // index of each name so far
	n        int            // targets added
}

// CheckSet starts checking a set of owner and selector; the errors are
// those of the owner and the selector, at their paths.
func (e *Engine) CheckSet(owner string, selector map[string]string) (*SetCheck, field.List) {
	errs := validateSet(ApplySet{Owner: owner, Selector: selector})
	return &SetCheck{e: e, selector: selector, seen: make(map[string]int)}, errs
}

// Len is the number of targets added so far.
func (c *SetCheck) Len() int { return c.n }

// Add checks the next target of the set, spec, at its index Len(): the
// errors are at paths under "targets[i]".
func (c *SetCheck) Add(spec *target.Spec) field.List {
	i := c.n
	c.n++
	path := field.NewPath("targets").Index(i)
	if i >= MaxApplyTargets {
		return field.List{field.Invalid(field.NewPath("targets"), i+1, fmt.Sprintf("at most %d targets in one set", MaxApplyTargets))}
	}
	var errs field.List
	if j, dup := c.seen[spec.Name]; dup {
		errs = append(errs, field.Invalid(path.Child("name"), spec.Name, fmt.Sprintf("also the name of targets[%d]", j)))
	}
	if !matchLabels(spec.Labels, c.selector) {
		errs = append(errs, field.Invalid(path.Child("labels"), spec.Name, "must carry every label of the selector"))
	}
	var old *target.Spec
	if r, ok := c.e.feed.record(spec.Name); ok {
		old = r.spec
	}
	errs = append(errs, rebase(c.e.validateList(spec, old), fmt.Sprintf("targets[%d]", i))...)
	if _, dup := c.seen[spec.Name]; !dup {
		c.seen[spec.Name] = i
	}
	return errs
}
