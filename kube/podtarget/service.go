package podtarget

import (
	"fmt"
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// dns1035Label is a Kubernetes Service name: lower case alphanumerics and
// '-', starting with a letter, ending with an alphanumeric.
var dns1035Label = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// serviceLabels copies the pod's xDS service annotations into labels: the
// service name as LabelService, the serving port (resolved as a probe's
// port is) as LabelServingPort. It returns what is wrong with them.
func serviceLabels(pod *corev1.Pod, labels map[string]string) []FieldError {
	var errs []FieldError
	if svc, ok := pod.Annotations[ServiceAnnotation]; ok {
		if len(svc) > 63 || !dns1035Label.MatchString(svc) {
			errs = append(errs, FieldError{Field: annotationField(ServiceAnnotation), Detail: fmt.Sprintf(
				"Invalid value: %s: a service name: at most 63 lower case alphanumeric characters or '-', starting with a letter and ending with an alphanumeric character (e.g. 'web')", quote(svc))})
		} else {
			labels[LabelService] = svc
		}
	}
	if port, ok := pod.Annotations[ServingPortAnnotation]; ok {
		n, detail := resolvePort(pod, port)
		switch {
		case detail != "":
			errs = append(errs, FieldError{Field: annotationField(ServingPortAnnotation), Detail: detail})
		default:
			labels[LabelServingPort] = strconv.Itoa(n)
		}
	}
	return errs
}

// annotationField is the field path of an annotation, as kubectl names it.
func annotationField(name string) string { return "metadata.annotations[" + name + "]" }
