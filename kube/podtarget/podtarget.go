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
// The probes reach the pod only: the host is the pod's IP (a host naming
// anything else is a field error), and a port may be a container port
// name, resolved as kubelet resolves it.
package podtarget

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
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
)

// probeKeys are the annotation's fields, in the order they are reported.
var probeKeys = []string{"startupProbe", "livenessProbe", "readinessProbe"}

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
	var errs []FieldError
	switch {
	case !ok:
		return nil, &InvalidError{Errors: []FieldError{{Field: annotationPath, Detail: "Required value: the pod lists the readiness gate " + GateType + " but has no probes"}}}
	case len(raw) > MaxAnnotationBytes:
		return nil, &InvalidError{Errors: []FieldError{{Field: annotationPath, Detail: fmt.Sprintf("Too long: must have at most %d bytes", MaxAnnotationBytes)}}}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		return nil, &InvalidError{Errors: []FieldError{{Field: annotationPath, Detail: "Invalid value: not a JSON object: " + err.Error()}}}
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(probeKeys, k) {
			errs = append(errs, FieldError{Field: annotationPath + "." + k, Detail: "Unsupported field: want startupProbe, livenessProbe or readinessProbe"})
		}
	}
	found := false
	for _, k := range probeKeys {
		msg, ok := fields[k]
		if !ok || string(msg) == "null" {
			continue
		}
		found = true
		p, perrs := probe(pod, annotationPath+"."+k, msg)
		errs = append(errs, perrs...)
		switch k {
		case "startupProbe":
			t.StartupProbe = p
		case "livenessProbe":
			t.LivenessProbe = p
		case "readinessProbe":
			t.ReadinessProbe = p
		}
	}
	if !found && len(errs) == 0 {
		errs = append(errs, FieldError{Field: annotationPath, Detail: "Required value: at least one of startupProbe, livenessProbe and readinessProbe"})
	}
	if len(errs) > 0 {
		return nil, &InvalidError{Errors: errs}
	}
	return t, nil
}

// handlerKeys are a probe's handlers that reach a host and port.
var handlerKeys = []string{"httpGet", "tcpSocket", "grpc"}

// probe decodes one probe of the annotation at path, aimed at the pod.
func probe(pod *corev1.Pod, path string, msg json.RawMessage) (*probev1.Probe, []FieldError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(msg, &fields); err != nil {
		return nil, []FieldError{{Field: path, Detail: "Invalid value: not a JSON object: " + err.Error()}}
	}
	var errs []FieldError
	if _, ok := fields["exec"]; ok {
		errs = append(errs, FieldError{Field: path + ".exec", Detail: "Forbidden: exec probes would run on probed's host, not in the pod"})
	}
	for _, h := range handlerKeys {
		hmsg, ok := fields[h]
		if !ok {
			continue
		}
		aimed, herrs := aim(pod, path+"."+h, hmsg)
		errs = append(errs, herrs...)
		fields[h] = aimed
	}
	if len(errs) > 0 {
		return nil, errs
	}
	rewritten, err := json.Marshal(fields)
	if err != nil {
		return nil, []FieldError{{Field: path, Detail: err.Error()}}
	}
	p := &probev1.Probe{}
	if err := protojson.Unmarshal(rewritten, p); err != nil {
		return nil, []FieldError{{Field: path, Detail: "Invalid value: " + protojsonDetail(err)}}
	}
	return p, nil
}

// aim sets the host of a handler to the pod's IP and resolves a named
// port.
func aim(pod *corev1.Pod, path string, msg json.RawMessage) (json.RawMessage, []FieldError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(msg, &fields); err != nil || fields == nil {
		return msg, []FieldError{{Field: path, Detail: "Invalid value: not a JSON object"}}
	}
	var errs []FieldError
	if h, ok := fields["host"]; ok {
		var host string
		if err := json.Unmarshal(h, &host); err != nil || (host != "" && host != pod.Status.PodIP) {
			errs = append(errs, FieldError{Field: path + ".host", Detail: fmt.Sprintf("Forbidden: probes reach the pod only; leave the host out (it is the pod IP, %s)", pod.Status.PodIP)})
		}
	}
	ip, _ := json.Marshal(pod.Status.PodIP)
	fields["host"] = ip
	if p, ok := fields["port"]; ok && bytes.HasPrefix(bytes.TrimSpace(p), []byte(`"`)) {
		var name string
		if err := json.Unmarshal(p, &name); err != nil {
			errs = append(errs, FieldError{Field: path + ".port", Detail: "Invalid value: " + err.Error()})
		} else if port, detail := resolvePort(pod, name); detail != "" {
			errs = append(errs, FieldError{Field: path + ".port", Detail: detail})
		} else {
			fields["port"] = json.RawMessage(strconv.Itoa(port))
		}
	}
	out, err := json.Marshal(fields)
	if err != nil {
		errs = append(errs, FieldError{Field: path, Detail: err.Error()})
	}
	return out, errs
}

// resolvePort resolves a port given as a string as kubelet does
// (pkg/probe.ResolveContainerPort): the containerPort of the first
// container port by that name, else the string as a number; it must be
// 1-65535. kubelet looks in the probe's container; a pod's probes belong
// to no container, so every container is searched in order. detail says
// why the port is bad, "" when it is not.
func resolvePort(pod *corev1.Pod, name string) (port int, detail string) {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return int(p.ContainerPort), ""
			}
		}
	}
	port, err := strconv.Atoi(name)
	if err != nil {
		return 0, fmt.Sprintf("Not found: %q: no container port by that name", name)
	}
	if port < 1 || port > 65535 {
		return 0, fmt.Sprintf("Invalid value: %d: must be between 1 and 65535", port)
	}
	return port, ""
}

// protojsonDetail drops protojson's "proto: " prefix and its unstable
// spacing.
func protojsonDetail(err error) string {
	s := strings.TrimPrefix(err.Error(), "proto:")
	return strings.Join(strings.Fields(s), " ")
}
