package target_test

import (
	"strings"
	"testing"

	"github.com/probed/probed/engine/feature"
	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

func ptr[T any](v T) *T { return &v }

func gates(subsecond, allowZero bool) feature.Gates {
	return feature.Gates{}.With(feature.SubSecondProbes, subsecond).With(feature.PodLifecycleSleepActionAllowZero, allowZero)
}

func opts(g feature.Gates) target.Options {
	return target.Options{Gates: g, MinPeriod: probe.DefaultMinPeriod, MinTimeout: probe.DefaultMinTimeout}
}

func httpProbe() *probe.Spec {
	return &probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: 8080}}}
}

func subsecondProbe() *probe.Spec {
	p := httpProbe()
	p.PeriodSeconds = 1
	p.PeriodMilliseconds = ptr[int32](-900)
	return p
}

func sleep(seconds int64) *target.Lifecycle {
	return &target.Lifecycle{PreStop: &target.Handler{Sleep: &target.SleepAction{Seconds: seconds}}}
}

type wantErr struct {
	field    string
	contains string
}

func TestValidate(t *testing.T) {
	t.Parallel()
	on, off := gates(true, true), gates(false, false)
	tests := []struct {
		name  string
		spec  target.Spec
		old   *target.Spec
		gates feature.Gates
		want  []wantErr
	}{
		{name: "name only is valid (a target without probes is ready once created)", spec: target.Spec{Name: "web-1"}, gates: on},
		{name: "all probes", spec: target.Spec{Name: "a", StartupProbe: httpProbe(), LivenessProbe: httpProbe(), ReadinessProbe: subsecondProbe()}, gates: on},
		{name: "missing name", spec: target.Spec{}, gates: on, want: []wantErr{{"target.name", "Required value: a name is required"}}},
		{name: "upper case name", spec: target.Spec{Name: "Web"}, gates: on, want: []wantErr{{"target.name", `Invalid value: "Web": a DNS-1123 label`}}},
		{name: "name with dot", spec: target.Spec{Name: "a.b"}, gates: on, want: []wantErr{{"target.name", "DNS-1123"}}},
		{name: "name ending in dash", spec: target.Spec{Name: "a-"}, gates: on, want: []wantErr{{"target.name", "DNS-1123"}}},
		{name: "63 character name", spec: target.Spec{Name: strings.Repeat("a", 63)}, gates: on},
		{name: "64 character name", spec: target.Spec{Name: strings.Repeat("a", 64)}, gates: on, want: []wantErr{{"target.name", "Too long: must have at most 63 bytes"}}},
		{name: "namespaced name", spec: target.Spec{Name: "team-a/web-0.eu"}, gates: on},
		{name: "namespaced name of 253 characters", spec: target.Spec{Name: "ns/" + strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)}, gates: on},
		{name: "namespaced name of 254 characters", spec: target.Spec{Name: "ns/" + strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 62)}, gates: on, want: []wantErr{{"target.name", "NAME of a NAMESPACE/NAME name must be a DNS-1123 subdomain"}}},
		{name: "namespace with a dot", spec: target.Spec{Name: "team.a/web"}, gates: on, want: []wantErr{{"target.name", "namespace of a NAMESPACE/NAME"}}},
		{name: "empty namespace", spec: target.Spec{Name: "/web"}, gates: on, want: []wantErr{{"target.name", "namespace of a NAMESPACE/NAME"}}},
		{name: "64 character namespace", spec: target.Spec{Name: strings.Repeat("n", 64) + "/web"}, gates: on, want: []wantErr{{"target.name", "namespace of a NAMESPACE/NAME"}}},
		{name: "empty local name", spec: target.Spec{Name: "team-a/"}, gates: on, want: []wantErr{{"target.name", "NAME of a NAMESPACE/NAME"}}},
		{name: "two slashes", spec: target.Spec{Name: "a/b/c"}, gates: on, want: []wantErr{{"target.name", "NAME of a NAMESPACE/NAME"}}},
		{name: "upper case local name", spec: target.Spec{Name: "a/Web"}, gates: on, want: []wantErr{{"target.name", "NAME of a NAMESPACE/NAME"}}},
		{name: "name too long in all", spec: target.Spec{Name: strings.Repeat("n", 63) + "/" + strings.Repeat("a", 254)}, gates: on, want: []wantErr{{"target.name", "Too long: must have at most 317 bytes"}}},
		{name: "labels", spec: target.Spec{Name: "a", Labels: map[string]string{"app": "web", "example.com/tier": "front_end-1", "empty": ""}}, gates: on},
		{
			name:  "bad labels are reported in key order",
			spec:  target.Spec{Name: "a", Labels: map[string]string{"b key": "v", "a": "bad value", "/x": "y"}},
			gates: on,
			want: []wantErr{
				{"target.labels[/x]", "prefix of a label key"},
				{"target.labels[a]", "a label value must be empty"},
				{`target.labels["b key"]`, "a label key must be"},
			},
		},
		{
			name:  "probe errors carry the probe's path",
			spec:  target.Spec{Name: "a", LivenessProbe: &probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "h", Port: 1}}, SuccessThreshold: 2}},
			gates: on,
			want:  []wantErr{{"target.livenessProbe.successThreshold", "must be 1 for liveness probes"}},
		},
		{
			name:  "problems in several places are all reported",
			spec:  target.Spec{Name: "A", ReadinessProbe: &probe.Spec{PeriodMilliseconds: ptr[int32](1000), Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "h", Port: 1}}}, TerminationGracePeriodSeconds: ptr[int64](-1)},
			gates: on,
			want: []wantErr{
				{"target.name", "DNS-1123"},
				{"target.readinessProbe.periodMilliseconds", "must be greater than -1000 and less than 1000"},
				{"target.terminationGracePeriodSeconds", "Invalid value: -1: must be greater than or equal to 0"},
			},
		},
		{
			name:  "SubSecondProbes off rejects milliseconds, naming the gate",
			spec:  target.Spec{Name: "a", ReadinessProbe: subsecondProbe()},
			gates: off,
			want:  []wantErr{{"target.readinessProbe.periodMilliseconds", "Forbidden: disabled by the SubSecondProbes feature gate"}},
		},
		{
			name:  "SubSecondProbes off ratchets: an update of a target that already uses milliseconds is valid",
			spec:  target.Spec{Name: "a", ReadinessProbe: subsecondProbe(), LivenessProbe: subsecondProbe()},
			old:   &target.Spec{Name: "a", ReadinessProbe: subsecondProbe()},
			gates: off,
		},
		{
			name:  "SubSecondProbes off: an update adding milliseconds to a target without them is rejected",
			spec:  target.Spec{Name: "a", ReadinessProbe: subsecondProbe()},
			old:   &target.Spec{Name: "a", ReadinessProbe: httpProbe()},
			gates: off,
			want:  []wantErr{{"target.readinessProbe.periodMilliseconds", "SubSecondProbes"}},
		},
		{name: "preStop sleep 0 with the gate on", spec: target.Spec{Name: "a", Lifecycle: sleep(0)}, gates: on},
		{name: "preStop sleep equal to the grace period", spec: target.Spec{Name: "a", Lifecycle: sleep(30)}, gates: on},
		{
			name:  "preStop sleep above the default grace period",
			spec:  target.Spec{Name: "a", Lifecycle: sleep(31)},
			gates: on,
			want:  []wantErr{{"target.lifecycle.preStop.sleep.seconds", "Invalid value: 31: must be non-negative and less than terminationGracePeriodSeconds (30)"}},
		},
		{
			name:  "preStop sleep above a set grace period",
			spec:  target.Spec{Name: "a", Lifecycle: sleep(6), TerminationGracePeriodSeconds: ptr[int64](5)},
			gates: on,
			want:  []wantErr{{"target.lifecycle.preStop.sleep.seconds", "terminationGracePeriodSeconds (5)"}},
		},
		{
			name:  "negative preStop sleep with the gate on",
			spec:  target.Spec{Name: "a", Lifecycle: sleep(-1)},
			gates: on,
			want:  []wantErr{{"target.lifecycle.preStop.sleep.seconds", "Invalid value: -1: must be non-negative"}},
		},
		{
			name:  "preStop sleep 0 with the gate off gets seed 002's message",
			spec:  target.Spec{Name: "a", Lifecycle: sleep(0)},
			gates: off,
			want: []wantErr{{"target.lifecycle.preStop.sleep.seconds",
				"Invalid value: 0: must be greater than 0 and less than terminationGracePeriodSeconds (30). Please enable PodLifecycleSleepActionAllowZero feature gate if you need a sleep of zero duration."}},
		},
		{name: "preStop sleep 1 with the gate off", spec: target.Spec{Name: "a", Lifecycle: sleep(1)}, gates: off},
		{
			name:  "PodLifecycleSleepActionAllowZero off ratchets: an update keeping sleep 0 is valid",
			spec:  target.Spec{Name: "a", Lifecycle: sleep(0), Labels: map[string]string{"changed": "yes"}},
			old:   &target.Spec{Name: "a", Lifecycle: sleep(0)},
			gates: off,
		},
		{
			name:  "PodLifecycleSleepActionAllowZero off: an update to sleep 0 from a non-zero sleep is rejected",
			spec:  target.Spec{Name: "a", Lifecycle: sleep(0)},
			old:   &target.Spec{Name: "a", Lifecycle: sleep(5)},
			gates: off,
			want:  []wantErr{{"target.lifecycle.preStop.sleep.seconds", "Please enable PodLifecycleSleepActionAllowZero"}},
		},
		{
			name:  "preStop without an action",
			spec:  target.Spec{Name: "a", Lifecycle: &target.Lifecycle{PreStop: &target.Handler{}}},
			gates: on,
			want:  []wantErr{{"target.lifecycle.preStop", "Required value: must specify a handler type: sleep"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := target.Validate(&tt.spec, tt.old, opts(tt.gates))
			checkErrors(t, got, tt.want)
		})
	}
}

func checkErrors(t *testing.T, got field.List, want []wantErr) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(got), len(want), got.Err())
	}
	for i, w := range want {
		if got[i].Field != w.field || !strings.Contains(got[i].Description(), w.contains) {
			t.Errorf("error %d = %q at %q, want %q containing %q", i, got[i].Description(), got[i].Field, w.field, w.contains)
		}
	}
}

func TestSpecHelpers(t *testing.T) {
	t.Parallel()
	s := &target.Spec{Name: "a", Lifecycle: sleep(5), TerminationGracePeriodSeconds: ptr[int64](10), ReadinessProbe: subsecondProbe()}
	if d, ok := s.PreStopSleep(); !ok || d.Seconds() != 5 {
		t.Errorf("PreStopSleep() = %v, %v; want 5s, true", d, ok)
	}
	if s.GracePeriod().Seconds() != 10 {
		t.Errorf("GracePeriod() = %v, want 10s", s.GracePeriod())
	}
	if (&target.Spec{}).GracePeriod().Seconds() != 30 {
		t.Errorf("default GracePeriod() = %v, want 30s", (&target.Spec{}).GracePeriod())
	}
	if !s.UsesMilliseconds() || s.UsesZeroSleep() {
		t.Errorf("UsesMilliseconds() = %v, UsesZeroSleep() = %v; want true, false", s.UsesMilliseconds(), s.UsesZeroSleep())
	}
	if s.Probe(probe.Readiness) != s.ReadinessProbe || s.Probe(probe.Liveness) != nil {
		t.Error("Probe() does not return the probe of the type")
	}
}
