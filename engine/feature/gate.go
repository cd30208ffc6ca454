// Package feature holds probed's feature gates and parses them in
// Kubernetes' --feature-gates syntax ("Name=true,Other=false").
package feature

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Gate names one feature gate.
type Gate string

const (
	// SubSecondProbes allows the *Milliseconds probe fields (KEP-3066).
	SubSecondProbes Gate = "SubSecondProbes"
	// PodLifecycleSleepActionAllowZero allows a preStop sleep of 0 seconds
	// (KEP-4818).
	PodLifecycleSleepActionAllowZero Gate = "PodLifecycleSleepActionAllowZero"
)

// defaults lists every known gate and its default.
var defaults = map[Gate]bool{
	SubSecondProbes:                  true,
	PodLifecycleSleepActionAllowZero: true,
}

// Known returns the names of every gate, sorted.
func Known() []Gate {
	names := make([]Gate, 0, len(defaults))
	for g := range defaults {
		names = append(names, g)
	}
	slices.Sort(names)
	return names
}

// Gates is a set of gate values. The zero value has every gate at its
// default. Gates implements flag.Value, so it can be a command-line flag.
type Gates struct {
	set map[Gate]bool // overrides of the defaults
}

// Enabled reports whether g is on.
func (gs Gates) Enabled(g Gate) bool {
	if v, ok := gs.set[g]; ok {
		return v
	}
	return defaults[g]
}

// With returns a copy of gs with g set to on.
func (gs Gates) With(g Gate, on bool) Gates {
	set := make(map[Gate]bool, len(gs.set)+1)
	for k, v := range gs.set {
		set[k] = v
	}
	set[g] = on
	return Gates{set: set}
}

// Parse reads "Name=bool,Name=bool". Unknown names and values that are not
// booleans are errors that name the offending entry and list the known
// gates. An empty string gives the defaults.
func Parse(s string) (Gates, error) {
	var gs Gates
	if err := gs.Set(s); err != nil {
		return Gates{}, err
	}
	return gs, nil
}

// Set implements flag.Value; entries are merged into gs.
func (gs *Gates) Set(s string) error {
	set := make(map[Gate]bool, len(gs.set))
	for k, v := range gs.set {
		set[k] = v
	}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, value, ok := strings.Cut(entry, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return fmt.Errorf("feature gate %q: missing =true or =false (syntax: Name=true,Other=false)", entry)
		}
		g := Gate(name)
		if _, known := defaults[g]; !known {
			return fmt.Errorf("unrecognized feature gate %q (known gates: %s)", name, knownList())
		}
		on, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return fmt.Errorf("feature gate %s: invalid value %q: must be true or false", name, strings.TrimSpace(value))
		}
		set[g] = on
	}
	gs.set = set
	return nil
}

// String renders every gate, sorted: "A=true,B=false".
func (gs *Gates) String() string {
	if gs == nil {
		return ""
	}
	var parts []string
	for _, g := range Known() {
		parts = append(parts, string(g)+"="+strconv.FormatBool(gs.Enabled(g)))
	}
	return strings.Join(parts, ",")
}

func knownList() string {
	names := make([]string, 0, len(defaults))
	for _, g := range Known() {
		names = append(names, string(g))
	}
	return strings.Join(names, ", ")
}
