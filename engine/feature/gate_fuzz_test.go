package feature_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/probed/probed/engine/feature"
)

// FuzzParse feeds --feature-gates values to Parse: it never panics, an
// error names what is wrong without echoing unbounded garbage, and what it
// accepts renders (String) to a value that parses to the same gates.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"SubSecondProbes=true",
		"SubSecondProbes=false,PodLifecycleSleepActionAllowZero=false",
		" SubSecondProbes = 0 , , PodLifecycleSleepActionAllowZero=T",
		"SubSecondProbes",
		"SubSecondProbe=true",
		"SubSecondProbes=maybe",
		"=true",
		"SubSecondProbes=true=false",
		",,,",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		gs, err := feature.Parse(s)
		if err != nil {
			if msg := err.Error(); msg == "" || !utf8.ValidString(msg) && utf8.ValidString(s) {
				t.Fatalf("Parse(%q) error %q", s, msg)
			}
			return
		}
		rendered := gs.String()
		again, err := feature.Parse(rendered)
		if err != nil {
			t.Fatalf("Parse(%q) accepted, but its String %q does not parse: %v", s, rendered, err)
		}
		for _, g := range feature.Known() {
			if gs.Enabled(g) != again.Enabled(g) {
				t.Fatalf("Parse(%q): %s=%v, after a round trip through %q %v", s, g, gs.Enabled(g), rendered, again.Enabled(g))
			}
		}
		if again.String() != rendered {
			t.Fatalf("String is not stable: %q then %q", rendered, again.String())
		}
		// Set merges: setting the rendered value over the parsed gates
		// changes nothing.
		if err := gs.Set(rendered); err != nil || gs.String() != rendered {
			t.Fatalf("Set(%q) over itself = %v, %q", rendered, err, gs.String())
		}
		if strings.Count(rendered, "=") != len(feature.Known()) {
			t.Fatalf("String %q does not list every known gate", rendered)
		}
	})
}
