package feature_test

import (
	"flag"
	"strings"
	"testing"

	"github.com/probed/probed/engine/feature"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        string
		subsecond bool
		allowZero bool
		wantErr   string
	}{
		{name: "empty gives defaults", in: "", subsecond: true, allowZero: true},
		{name: "both off", in: "SubSecondProbes=false,PodLifecycleSleepActionAllowZero=false", subsecond: false, allowZero: false},
		{name: "one off", in: "SubSecondProbes=false", subsecond: false, allowZero: true},
		{name: "spaces and trailing comma", in: " PodLifecycleSleepActionAllowZero = false , ", subsecond: true, allowZero: false},
		{name: "strconv booleans", in: "SubSecondProbes=0,PodLifecycleSleepActionAllowZero=T", subsecond: false, allowZero: true},
		{name: "last wins", in: "SubSecondProbes=false,SubSecondProbes=true", subsecond: true, allowZero: true},
		{name: "unknown gate", in: "SubsecondProbes=true", wantErr: `unrecognized feature gate "SubsecondProbes" (known gates: PodLifecycleSleepActionAllowZero, SubSecondProbes)`},
		{name: "bad value", in: "SubSecondProbes=yes", wantErr: `feature gate SubSecondProbes: invalid value "yes": must be true or false`},
		{name: "missing value", in: "SubSecondProbes", wantErr: `feature gate "SubSecondProbes": missing =true or =false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gs, err := feature.Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q) error = %v", tt.in, err)
			}
			if got := gs.Enabled(feature.SubSecondProbes); got != tt.subsecond {
				t.Errorf("SubSecondProbes = %v, want %v", got, tt.subsecond)
			}
			if got := gs.Enabled(feature.PodLifecycleSleepActionAllowZero); got != tt.allowZero {
				t.Errorf("PodLifecycleSleepActionAllowZero = %v, want %v", got, tt.allowZero)
			}
		})
	}
}

func TestGatesAsFlag(t *testing.T) {
	t.Parallel()
	var gs feature.Gates
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.Var(&gs, "feature-gates", "")
	if err := fs.Parse([]string{"--feature-gates=SubSecondProbes=false"}); err != nil {
		t.Fatal(err)
	}
	if gs.Enabled(feature.SubSecondProbes) {
		t.Error("SubSecondProbes still enabled after --feature-gates=SubSecondProbes=false")
	}
	if want := "PodLifecycleSleepActionAllowZero=true,SubSecondProbes=false"; gs.String() != want {
		t.Errorf("String() = %q, want %q", gs.String(), want)
	}
	if err := fs.Parse([]string{"--feature-gates=Nope=true"}); err == nil {
		t.Error("unknown gate accepted by the flag")
	}
}

func TestWithDoesNotAlias(t *testing.T) {
	t.Parallel()
	base := feature.Gates{}.With(feature.SubSecondProbes, false)
	on := base.With(feature.SubSecondProbes, true)
	if base.Enabled(feature.SubSecondProbes) || !on.Enabled(feature.SubSecondProbes) {
		t.Errorf("With changed its receiver: base=%v on=%v", base.Enabled(feature.SubSecondProbes), on.Enabled(feature.SubSecondProbes))
	}
}
