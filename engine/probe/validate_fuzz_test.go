package probe_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/probe"
)

// FuzzValidate feeds probe specs (as JSON, so the fuzzer mutates
// structure as well as values) to Validate for every probe type. Validate
// never panics, reports every error at a field under the probe's path,
// gives the same answer twice, and a spec it accepts has sane effective
// values.
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		`{"handler":{"httpGet":{"host":"127.0.0.1","port":8080,"path":"/healthz"}},"periodSeconds":1,"periodMilliseconds":-900}`,
		`{"handler":{"httpGet":{"host":"h","port":443,"scheme":"HTTPS","tls":{"caPem":"x","serverName":"s"},"httpHeaders":[{"name":"X-A","value":"b"}],"expectedBody":"ok"}}}`,
		`{"handler":{"tcpSocket":{"host":"::1","port":1}},"timeoutSeconds":0,"timeoutMilliseconds":-999,"initialDelayMilliseconds":-1}`,
		`{"handler":{"grpc":{"host":"h","port":65535,"service":""}},"successThreshold":2,"failureThreshold":-1,"initializationFailureThreshold":5}`,
		`{"handler":{"exec":{"command":["true","a"]}},"initialPeriodSeconds":0,"initialPeriodMilliseconds":50}`,
		`{"handler":{"exec":{"command":[""]},"tcpSocket":{"host":"","port":0}},"periodSeconds":2147483647,"periodMilliseconds":999}`,
		`{"handler":{},"timeoutSeconds":-2147483648,"initialDelaySeconds":-2147483648,"initialDelayMilliseconds":-999}`,
		`{"handler":{"httpGet":{"host":"a b","port":80,"path":"no-slash","httpHeaders":[{"name":"","value":"\r\n"},{"name":"B@d","value":"x"}]}}}`,
		`{"handler":{"httpGet":{"host":"127.0.0.1:8080","port":80,"path":"/%zz"}}}`,
		`{"handler":{"tcpSocket":{"host":"::ffff:0.0.0.0","port":1}}}`,
		`{"handler":{"grpc":{"host":"::1%","port":1,"tls":{"serverName":"\u001b[31m"}}}}`,
		`{"handler":{"exec":{"command":["true","a\u0000b"]}}}`,
	} {
		f.Add([]byte(seed), true, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, subSecond, allowExec bool) {
		var s probe.Spec
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		opts := probe.Options{MinPeriod: 100 * time.Millisecond, MinTimeout: 100 * time.Millisecond, SubSecondProbes: subSecond, AllowExec: allowExec}
		for _, typ := range probe.Types {
			root := field.NewPath("target").Child(typ.Field())
			errs := s.Validate(typ, root, opts)
			checkFieldPaths(t, errs, root.String())
			if again := s.Validate(typ, root, opts); !sameErrors(errs, again) {
				t.Fatalf("Validate is not deterministic:\n%v\n%v", errs.Err(), again.Err())
			}
			if len(errs) == 0 {
				checkValid(t, &s, typ, opts)
			}
		}
	})
}

// checkFieldPaths asserts every error is at a field under prefix, with a type
// and a description.
func checkFieldPaths(t *testing.T, errs field.List, prefix string) {
	t.Helper()
	for _, e := range errs {
		if e == nil {
			t.Fatal("nil error in the list")
		}
		if e.Field != prefix && !strings.HasPrefix(e.Field, prefix+".") && !strings.HasPrefix(e.Field, prefix+"[") {
			t.Fatalf("error %q is not under %q", e.Error(), prefix)
		}
		if e.Type == "" || e.Description() == "" {
			t.Fatalf("error without a type or description: %#v", e)
		}
	}
}

func sameErrors(a, b field.List) bool {
	return slices.EqualFunc(a, b, func(x, y *field.Error) bool { return x.Error() == y.Error() })
}

// checkValid asserts what validation promises about an accepted spec.
func checkValid(t *testing.T, s *probe.Spec, typ probe.Type, opts probe.Options) {
	t.Helper()
	eff := s.Effective()
	switch {
	case eff.Period < opts.MinPeriod, eff.InitialPeriod < opts.MinPeriod:
		t.Fatalf("accepted period %v / initial period %v below %v", eff.Period, eff.InitialPeriod, opts.MinPeriod)
	case eff.Timeout < opts.MinTimeout:
		t.Fatalf("accepted timeout %v below %v", eff.Timeout, opts.MinTimeout)
	case eff.InitialDelay < 0:
		t.Fatalf("accepted negative initial delay %v", eff.InitialDelay)
	case eff.SuccessThreshold < 1 || eff.FailureThreshold < 1 || eff.InitializationFailureThreshold < eff.FailureThreshold:
		t.Fatalf("accepted thresholds %+v", eff)
	case typ != probe.Readiness && eff.SuccessThreshold != 1:
		t.Fatalf("accepted successThreshold %d for a %s probe", eff.SuccessThreshold, typ)
	case !opts.SubSecondProbes && s.UsesMilliseconds():
		t.Fatal("accepted milliseconds with SubSecondProbes off")
	}
	h := s.Handler
	n := 0
	for _, set := range []bool{h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil, h.Exec != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("accepted %d handlers", n)
	}
	switch {
	case h.HTTPGet != nil:
		g := h.HTTPGet
		if g.Host == "" || g.Port < 1 || g.Port > 65535 || len(g.Headers) > probe.MaxHeaders || len(g.Path) > probe.MaxPathBytes {
			t.Fatalf("accepted httpGet %+v", g)
		}
		for _, hd := range g.Headers {
			if hd.Name == "" || strings.ContainsAny(hd.Value, "\r\n\x00") {
				t.Fatalf("accepted header %q: %q", hd.Name, hd.Value)
			}
		}
	case h.TCPSocket != nil:
		if h.TCPSocket.Host == "" || h.TCPSocket.Port < 1 || h.TCPSocket.Port > 65535 {
			t.Fatalf("accepted tcpSocket %+v", h.TCPSocket)
		}
	case h.GRPC != nil:
		if h.GRPC.Host == "" || h.GRPC.Port < 1 || h.GRPC.Port > 65535 {
			t.Fatalf("accepted grpc %+v", h.GRPC)
		}
	case h.Exec != nil:
		if !opts.AllowExec || len(h.Exec.Command) == 0 || h.Exec.Command[0] == "" || len(h.Exec.Command) > probe.MaxCommandArgs {
			t.Fatalf("accepted exec %q (allowed: %v)", h.Exec.Command, opts.AllowExec)
		}
	}
}
