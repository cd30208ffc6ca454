package podtarget

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

const testPodIP = "10.244.0.7"

func testPod(annotation string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "u-1",
			Annotations: map[string]string{ProbesAnnotation: annotation}},
		Spec: corev1.PodSpec{
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: GateType}},
			Containers:     []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8081}}}},
		},
		Status: corev1.PodStatus{PodIP: testPodIP},
	}
}

// walkFields calls fn with the path of every field of md's tree, depth
// first.
func walkFields(md protoreflect.MessageDescriptor, path []protoreflect.FieldDescriptor, fn func([]protoreflect.FieldDescriptor)) {
	fds := md.Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		p := append(slices.Clone(path), fd)
		fn(p)
		if fd.Message() != nil && !slices.ContainsFunc(path, func(f protoreflect.FieldDescriptor) bool { return f.Message() == fd.Message() }) {
			walkFields(fd.Message(), p, fn)
		}
	}
}

var probeDescriptor = (&probev1.Probe{}).ProtoReflect().Descriptor()

// TestEveryProbeFieldHasARule: a field added to probe.v1.Probe's tree
// fails here until destination.go says whether a pod may set it (and it
// is refused in pods meanwhile).
func TestEveryProbeFieldHasARule(t *testing.T) {
	seen := map[protoreflect.FullName]bool{}
	walkFields(probeDescriptor, nil, func(path []protoreflect.FieldDescriptor) {
		fd := path[len(path)-1]
		seen[fd.FullName()] = true
		if _, ok := rules[fd.FullName()]; !ok {
			t.Errorf("%s has no rule in destination.go: decide whether a pod may set it, and whether it names a destination", fd.FullName())
		}
	})
	for name := range rules {
		if !seen[name] {
			t.Errorf("destination.go has a rule for %s, which probe.v1.Probe's tree lacks", name)
		}
	}
}

// spellings returns, as JSON text, every key protojson reads as fd: its
// JSON name and its proto name, each also with its first letter escaped.
func spellings(fd protoreflect.FieldDescriptor) []string {
	var out []string
	for _, name := range []string{fd.JSONName(), string(fd.Name())} {
		for _, key := range []string{
			`"` + name + `"`,
			fmt.Sprintf(`"\u%04x%s"`, name[0], name[1:]),
		} {
			if !slices.Contains(out, key) {
				out = append(out, key)
			}
		}
	}
	return out
}

// destinationCase is one annotation that names a destination.
type destinationCase struct {
	annotation string
	field      string // the field the error names (JSON names)
	decoded    []protoreflect.FieldDescriptor
}

// destinationPaths returns the path of every field whose rule is about a
// destination, from probe.v1.Probe's descriptors and the rules.
func destinationPaths() [][]protoreflect.FieldDescriptor {
	var out [][]protoreflect.FieldDescriptor
	walkFields(probeDescriptor, nil, func(path []protoreflect.FieldDescriptor) {
		switch rules[path[len(path)-1].FullName()].kind {
		case podHost, podServerName, headerName:
			out = append(out, path)
		}
	})
	return out
}

// annotations builds, for a path into a probe, the annotation of every
// combination of spellings (of the probe's key and of each field on the
// path) with leaf as the last field's value. A handler gets port 8081
// (and scheme HTTPS when its tls is on the path) so that only the leaf
// can be wrong.
func annotations(path []protoreflect.FieldDescriptor, leaf string) []destinationCase {
	targetMD := (&probev1.Target{}).ProtoReflect().Descriptor()
	var cases []destinationCase
	for _, probeName := range probeFields {
		probeFD := targetMD.Fields().ByName(probeName)
		var build func(i int, canon string) []destinationCase
		build = func(i int, canon string) []destinationCase {
			fd := path[i]
			canon += "." + fd.JSONName()
			if fd.IsList() {
				canon += "[0]"
			}
			var out []destinationCase
			for _, key := range spellings(fd) {
				if i == len(path)-1 {
					value := leaf
					if fd.ContainingMessage().FullName() == "probe.v1.HTTPHeader" {
						// The header's other field.
						value = leaf + `, "value": "x"`
						out = append(out, destinationCase{annotation: "{" + key + ": " + value + "}", field: canon})
						continue
					}
					out = append(out, destinationCase{annotation: key + ": " + value, field: canon})
					continue
				}
				for _, inner := range build(i+1, canon) {
					body := inner.annotation
					if !strings.HasPrefix(body, "{") {
						body = "{" + body + "}"
					}
					if fd.Message() != nil && fd.Message().Fields().ByName("port") != nil {
						body = strings.TrimSuffix(body, "}") + `, "port": 8081`
						if path[i+1].Name() == "tls" && fd.Message().Fields().ByName("scheme") != nil {
							body += `, "scheme": "SCHEME_HTTPS"`
						}
						body += "}"
					}
					if fd.IsList() {
						body = "[" + body + "]"
					}
					out = append(out, destinationCase{annotation: key + ": " + body, field: inner.field})
				}
			}
			return out
		}
		for _, c := range build(0, "") {
			for _, key := range spellings(probeFD) {
				cases = append(cases, destinationCase{
					annotation: "{" + key + ": {" + c.annotation + "}}",
					field:      annotationPath + "." + probeFD.JSONName() + c.field,
					decoded:    append([]protoreflect.FieldDescriptor{probeFD}, path...),
				})
			}
		}
	}
	return cases
}

// TestEveryDestinationSpellingRefused: for every field that names a
// destination, under every spelling protojson accepts of it and of every
// field above it, a value other than the pod is refused and names the
// field; the pod's own address (or none) is accepted and the decoded
// probe aims at the pod.
func TestEveryDestinationSpellingRefused(t *testing.T) {
	foreign := map[ruleKind][]string{
		podHost:       {`"169.254.169.254"`, `"kubernetes.default.svc"`, `"localhost"`, `"::ffff:` + testPodIP + `"`, `"` + testPodIP + `%lo"`, `"10.244.0.70"`},
		podServerName: {`"169.254.169.254"`, `"kubernetes.default.svc"`, `"localhost"`},
		headerName:    {`"Host"`, `"host"`, `"HOST"`, `"X-Forwarded-Host"`, `"forwarded"`, `":authority"`},
	}
	own := map[ruleKind][]string{
		podHost:       {`"` + testPodIP + `"`, `""`},
		podServerName: {`"` + testPodIP + `"`, `""`},
		headerName:    {`"X-Probe"`},
	}
	paths := destinationPaths()
	if len(paths) < 6 {
		t.Fatalf("destination fields found: %d; want at least the hosts of httpGet, tcpSocket and grpc, their TLS server names and the HTTP headers", len(paths))
	}
	refused, accepted := 0, 0
	for _, path := range paths {
		kind := rules[path[len(path)-1].FullName()].kind
		for _, leaf := range foreign[kind] {
			for _, c := range annotations(path, leaf) {
				_, err := Target(testPod(c.annotation), "ctl")
				inv, ok := errors.AsType[*InvalidError](err)
				if !ok {
					t.Errorf("%s: Target = %v; want the field refused", c.annotation, err)
					continue
				}
				if !slices.ContainsFunc(inv.Errors, func(fe FieldError) bool {
					return fe.Field == c.field && strings.HasPrefix(fe.Detail, "Forbidden")
				}) {
					t.Errorf("%s: errors %v; want %s Forbidden", c.annotation, err, c.field)
				}
				refused++
			}
		}
		for _, leaf := range own[kind] {
			for _, c := range annotations(path, leaf) {
				tg, err := Target(testPod(c.annotation), "ctl")
				if err != nil {
					t.Errorf("%s: %v; want it accepted", c.annotation, err)
					continue
				}
				checkAimed(t, c.annotation, tg.ProtoReflect())
				accepted++
			}
		}
	}
	t.Logf("%d annotations refused, %d accepted, over %d destination fields", refused, accepted, len(paths))
}

// checkAimed fails t unless every host of m's tree is the pod's IP and
// every server name is empty or the pod's IP.
func checkAimed(t *testing.T, annotation string, m protoreflect.Message) {
	t.Helper()
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case rules[fd.FullName()].kind == podHost && v.String() != testPodIP:
			t.Errorf("%s: %s = %q; want the pod IP", annotation, fd.FullName(), v.String())
		case rules[fd.FullName()].kind == podServerName && !isPod(v.String(), testPodIP):
			t.Errorf("%s: %s = %q", annotation, fd.FullName(), v.String())
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				checkAimed(t, annotation, v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap():
			checkAimed(t, annotation, v.Message())
		}
		return true
	})
}

// TestEverySpellingOfAHandlerAimed: a handler under any spelling, host
// left out, is aimed at the pod, and a port name under any spelling is
// resolved.
func TestEverySpellingOfAHandlerAimed(t *testing.T) {
	handlers := probeDescriptor.Oneofs().ByName("handler").Fields()
	n := 0
	for i := range handlers.Len() {
		h := handlers.Get(i)
		port := h.Message().Fields().ByName("port")
		if port == nil {
			continue // exec: refused, TestTargetInvalid
		}
		for _, hk := range spellings(h) {
			for _, pk := range spellings(port) {
				a := `{"readinessProbe": {` + hk + `: {` + pk + `: "http"}}}`
				tg, err := Target(testPod(a), "ctl")
				if err != nil {
					t.Errorf("%s: %v", a, err)
					continue
				}
				hm := tg.GetReadinessProbe().ProtoReflect().Get(h).Message()
				if got := hm.Get(port).Int(); got != 8081 {
					t.Errorf("%s: port %d; want 8081", a, got)
				}
				checkAimed(t, a, tg.ProtoReflect())
				n++
			}
		}
	}
	t.Logf("%d spellings aimed", n)
}

// TestDuplicateSpellingsRefused: one field given under two spellings
// is refused, never resolved by whichever comes last.
func TestDuplicateSpellingsRefused(t *testing.T) {
	for _, a := range []string{
		`{"readinessProbe": {"tcpSocket": {"port": 1}, "tcp_socket": {"host": "169.254.169.254", "port": 1}}}`,
		`{"readinessProbe": {"tcpSocket": {"host": "", "h\u006fst": "169.254.169.254", "port": 1}}}`,
		`{"readinessProbe": {"tcpSocket": {"port": 1}}, "readiness_probe": {"tcpSocket": {"host": "169.254.169.254", "port": 1}}}`,
		`{"readinessProbe": {"httpGet": {"port": 1, "httpHeaders": [], "http_headers": [{"name": "Host", "value": "x"}]}}}`,
	} {
		if tg, err := Target(testPod(a), "ctl"); err == nil {
			t.Errorf("%s: accepted as %v", a, tg)
		}
	}
}
