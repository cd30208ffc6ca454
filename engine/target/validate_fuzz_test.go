package target_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine/feature"
	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/target"
)

// FuzzValidate feeds target specs (as JSON) to Validate on create and on
// update, with the feature gates on and off. Validate never panics and
// reports every error at a field under "target"; and ratcheting holds: a
// target accepted when created stays updatable to itself with every gate
// off (KEP-4818's downgrade story).
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		`{"name":"web","labels":{"app":"demo"},"readinessProbe":{"handler":{"httpGet":{"host":"127.0.0.1","port":8080}},"periodSeconds":1,"periodMilliseconds":-900}}`,
		`{"name":"db","startupProbe":{"handler":{"tcpSocket":{"host":"db","port":5432}},"initialPeriodMilliseconds":200},"livenessProbe":{"handler":{"grpc":{"host":"db","port":1}},"successThreshold":2}}`,
		`{"name":"drain","lifecycle":{"preStop":{"sleep":{"seconds":0}}},"terminationGracePeriodSeconds":0}`,
		`{"name":"x","lifecycle":{"preStop":{"sleep":{"seconds":31}}},"terminationGracePeriodSeconds":30}`,
		`{"name":"x","lifecycle":{"preStop":{}}}`,
		`{"name":"Bad_Name","labels":{"example.com/a":"b","-x":"y","k":"` + strings.Repeat("v", 64) + `"}}`,
		`{"name":"","terminationGracePeriodSeconds":-1,"readinessProbe":{"handler":{}}}`,
	} {
		f.Add([]byte(seed))
	}
	off := feature.Gates{}.With(feature.SubSecondProbes, false).With(feature.PodLifecycleSleepActionAllowZero, false)
	on := feature.Gates{}
	f.Fuzz(func(t *testing.T, data []byte) {
		var spec target.Spec
		if err := json.Unmarshal(data, &spec); err != nil {
			return
		}
		opts := func(g feature.Gates) target.Options {
			return target.Options{Gates: g, MinPeriod: 100 * time.Millisecond, MinTimeout: 100 * time.Millisecond, AllowExec: true}
		}
		created := target.Validate(&spec, nil, opts(on))
		for _, errs := range []field.List{
			created,
			target.Validate(&spec, nil, opts(off)),
			target.Validate(&spec, &spec, opts(off)),
			target.Validate(&spec, &spec, opts(on)),
		} {
			for _, e := range errs {
				if !strings.HasPrefix(e.Field, "target.") || e.Description() == "" {
					t.Fatalf("error %q is not at a field under target", e.Error())
				}
			}
		}
		if len(created) > 0 {
			return
		}
		if errs := target.Validate(&spec, &spec, opts(off)); len(errs) > 0 {
			t.Fatalf("a target accepted on create cannot be updated to itself with the gates off: %v", errs.Err())
		}
		if got := target.Validate(&spec, nil, opts(off)); (len(got) == 0) == (spec.UsesMilliseconds() || spec.UsesZeroSleep()) {
			t.Fatalf("with the gates off, create of a target using gated features (ms %v, zero sleep %v): %v",
				spec.UsesMilliseconds(), spec.UsesZeroSleep(), got.Err())
		}
		if d, ok := spec.PreStopSleep(); ok && (d < 0 || d > spec.GracePeriod()) {
			t.Fatalf("accepted a preStop sleep of %v with a grace period of %v", d, spec.GracePeriod())
		}
	})
}
