// Package podtarget turns a Kubernetes pod that opts in to probed's
// readiness gate into the probed target that probes it.
//
// A pod opts in when its spec.readinessGates lists GateType and its
// annotation ProbesAnnotation holds the probes in probed's API JSON form:
//
//	metadata:
//	  annotations:
//	    probed.io/probes: |
//	      {"readinessProbe": {"httpGet": {"port": "http", "path": "/ready"},
//	                          "periodSeconds": 1, "periodMilliseconds": -950}}
//	spec:
//	  readinessGates:
//	  - conditionType: probed.io/ready
//
// The probes reach the pod only: the rule is enforced on the decoded
// probe (destination.go), where every host is set to the pod's IP and
// any field naming another destination (a host, a TLS server name, a Host
// header) is a field error. A port may be a container port name, resolved
// as kubelet resolves it.
package podtarget

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// The names a pod and its target share.
const (
	// GateType is the readiness gate's condition type: a pod lists it in
	// spec.readinessGates to take part.
	GateType = "probed.io/ready"
	// ProbesAnnotation holds the pod's probes.
	ProbesAnnotation = "probed.io/probes"

	// Labels of every target: the pod's namespace, name and UID, and the
	// controller that owns the target.
	LabelNamespace = "probed.io/namespace"
	LabelPod       = "probed.io/pod"
	LabelUID       = "probed.io/uid"
	LabelOwner     = "probed.io/controller"

	// MaxAnnotationBytes bounds the annotation: longer is a field error.
	MaxAnnotationBytes = 64 << 10

	// ServiceAnnotation names the xDS service the pod's target is an
	// endpoint of (copied into LabelService): a target NAMESPACE/NAME
	// with probed.io/service=S is an endpoint of S.NAMESPACE.
	ServiceAnnotation = "probed.io/service"
	// ServingPortAnnotation is the port traffic goes to when it is not
	// the readiness probe's (a number or a container port name; copied
	// as a number into LabelServingPort).
	ServingPortAnnotation = "probed.io/serving-port"
	// Labels of a target that joins an xDS service.
	LabelService     = "probed.io/service"
	LabelServingPort = "probed.io/serving-port"

	// InjectLabel=enabled on a namespace makes the admission webhook add
	// the readiness gate to the pods created there with the annotation.
	InjectLabel = "probed.io/readiness-gate-inject"
)

// Annotations are the pod annotations a target is computed from.
var Annotations = []string{ProbesAnnotation, ServiceAnnotation, ServingPortAnnotation}

// annotationPath is the field path of the annotation, as kubectl names it.
const annotationPath = "metadata.annotations[" + ProbesAnnotation + "]"

// OptedIn reports whether pod lists the readiness gate. (A pod that lists
// it without the annotation takes part too: its condition says what is
// missing, or it would never become ready.)
func OptedIn(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool {
		return g.ConditionType == GateType
	})
}

// Name is the target name of the pod namespace/name.
func Name(namespace, name string) string { return namespace + "/" + name }

// FieldError is one problem with the pod's annotation or ports.
type FieldError struct {
	// Field is the path, e.g.
	// "metadata.annotations[probed.io/probes].readinessProbe.httpGet.port".
	Field string
	// Detail says what is wrong.
	Detail string
}

func (e FieldError) String() string { return e.Field + ": " + e.Detail }

// InvalidError lists every problem of a pod's probes.
type InvalidError struct {
	Errors []FieldError
}

func (e *InvalidError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		msgs[i] = fe.String()
	}
	return strings.Join(msgs, "; ")
}

// Target returns the target probing pod, owned by owner: named Name(pod's
// namespace, pod's name), labelled with its namespace, name, UID and
// owner, with the annotation's probes aimed at the pod's IP. The pod must
// have an IP. A bad annotation is an *InvalidError naming every bad field.
func Target(pod *corev1.Pod, owner string) (*probev1.Target, error) {
	if pod.Status.PodIP == "" {
		return nil, &InvalidError{Errors: []FieldError{{Field: "status.podIP", Detail: "the pod has no IP yet"}}}
	}
	t := &probev1.Target{
		Name: Name(pod.Namespace, pod.Name),
		Labels: map[string]string{
			LabelNamespace: pod.Namespace,
			LabelPod:       pod.Name,
			LabelUID:       string(pod.UID),
			LabelOwner:     owner,
		},
	}
	if len(pod.Name) > 63 {
		// A label value holds 63 bytes; the name is the target's anyway.
		delete(t.Labels, LabelPod)
	}
	raw, ok := pod.Annotations[ProbesAnnotation]
	switch {
	case !ok:
		return nil, &InvalidError{Errors: []FieldError{{Field: annotationPath, Detail: "Required value: the pod lists the readiness gate " + GateType + " but has no probes"}}}
	case len(raw) > MaxAnnotationBytes:
		return nil, &InvalidError{Errors: []FieldError{{Field: annotationPath, Detail: fmt.Sprintf("Too long: must have at most %d bytes", MaxAnnotationBytes)}}}
	}
	members, err := objectMembers([]byte(raw))
	if err != nil {
		return nil, &InvalidError{Errors: []FieldError{{Field: annotationPath, Detail: "Invalid value: not a JSON object: " + err.Error()}}}
	}
	var errs []FieldError
	md := t.ProtoReflect().Descriptor()
	seen := map[protoreflect.FieldNumber]string{}
	found := false
	for _, m := range members {
		fd := fieldByKey(md, m.key)
		if fd == nil || !slices.Contains(probeFields, fd.Name()) {
			errs = append(errs, FieldError{Field: annotationPath + keyPath(m.key), Detail: "Unsupported field: want startupProbe, livenessProbe or readinessProbe"})
			continue
		}
		path := annotationPath + "." + fd.JSONName()
		if first, dup := seen[fd.Number()]; dup {
			errs = append(errs, FieldError{Field: path, Detail: fmt.Sprintf("Duplicate value: given as %s and as %s", quote(first), quote(m.key))})
			continue
		}
		seen[fd.Number()] = m.key
		if string(bytes.TrimSpace(m.value)) == "null" {
			continue
		}
		found = true
		p, perrs := probe(pod, path, m.value)
		errs = append(errs, perrs...)
		if p != nil {
			t.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(p.ProtoReflect()))
		}
	}
	if !found && len(errs) == 0 {
		errs = append(errs, FieldError{Field: annotationPath, Detail: "Required value: at least one of startupProbe, livenessProbe and readinessProbe"})
	}
	errs = append(errs, serviceLabels(pod, t.Labels)...)
	if len(errs) == 0 {
		// What probed itself would refuse is refused here, before it is
		// sent: one pod's mistake never reaches its namespace's set.
		errs = validate(t)
	}
	if len(errs) > 0 {
		return nil, &InvalidError{Errors: errs}
	}
	return t, nil
}

// probeFields are the fields of a Target the annotation may set.
var probeFields = []protoreflect.Name{"startup_probe", "liveness_probe", "readiness_probe"}

// probe decodes one probe of the annotation at path, aimed at the pod.
func probe(pod *corev1.Pod, path string, raw json.RawMessage) (*probev1.Probe, []FieldError) {
	p := &probev1.Probe{}
	rewritten, errs := resolvePorts(pod, p.ProtoReflect().Descriptor(), path, raw)
	if len(errs) > 0 {
		return nil, errs
	}
	if err := protojson.Unmarshal(rewritten, p); err != nil {
		return nil, []FieldError{{Field: path, Detail: "Invalid value: " + protojsonDetail(err)}}
	}
	if errs := aim(p, pod.Status.PodIP, path); len(errs) > 0 {
		return nil, errs
	}
	return p, nil
}

// protojsonDetail drops protojson's "proto: " prefix and its unstable
// spacing.
func protojsonDetail(err error) string {
	s := strings.TrimPrefix(err.Error(), "proto:")
	return strings.Join(strings.Fields(s), " ")
}

// keyPath is the field path of a JSON key: ".key" when it is a plain
// name, else the key quoted in brackets.
func keyPath(key string) string {
	if key != "" && len(key) <= maxQuoteBytes && !strings.ContainsFunc(key, func(r rune) bool {
		return r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	}) {
		return "." + key
	}
	return "[" + quote(key) + "]"
}

// maxQuoteBytes bounds what a field error quotes of the annotation.
const maxQuoteBytes = 64

// quote quotes s for a message, with Go's escapes for control characters,
// cut to maxQuoteBytes.
func quote(s string) string {
	if len(s) <= maxQuoteBytes {
		return strconv.Quote(s)
	}
	n := maxQuoteBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strconv.Quote(s[:n]) + "..."
}
