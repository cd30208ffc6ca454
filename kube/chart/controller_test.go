package chart_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestControllerFlags: the controller's values reach its flags (every
// one rendered, so the chart's defaults are what runs), a namespace
// selector adds the namespaces' reads to the ClusterRole and only then,
// and the webhook injects gates only where the controller watches: the
// namespaces and the pods its selectors keep. TestChartArgsAccepted
// (kube/cmd/probed-kube) parses the same args with probed-kube's flags.
func TestControllerFlags(t *testing.T) {
	inject := map[string]string{"probed.io/readiness-gate-inject": "enabled"}
	tests := []struct {
		name      string
		args      []string
		want, not []string // controller args present, flags absent
		probed    []string // probed's args present
		// namespaces: the namespaces get/list/watch rule is in the role.
		namespaces bool
		role       string // the kind of the pods' role
		nsSelector metav1.LabelSelector
		objects    *metav1.LabelSelector
	}{
		{
			name: "default",
			want: []string{"--log-level=info", "--log-format=json", "--kube-api-qps=200", "--kube-api-burst=400",
				"--workers=8", "--condition-min-interval=1s", "--resync=5m"},
			not:        []string{"--namespace-selector", "--pod-selector", "--namespace="},
			probed:     []string{"--log-level=info", "--log-format=json"},
			role:       "ClusterRole",
			nsSelector: metav1.LabelSelector{MatchLabels: inject},
		},
		{
			name: "tuned",
			args: []string{"--set", "controller.logLevel=debug,controller.logFormat=text,controller.kubeAPI.qps=50.5,controller.kubeAPI.burst=1000000," +
				"controller.workers=32,controller.conditionMinInterval=250ms,controller.resync=1m30s,probed.logLevel=warn,probed.logFormat=text"},
			want: []string{"--log-level=debug", "--log-format=text", "--kube-api-qps=50.5", "--kube-api-burst=1000000",
				"--workers=32", "--condition-min-interval=250ms", "--resync=1m30s"},
			probed:     []string{"--log-level=warn", "--log-format=text"},
			role:       "ClusterRole",
			nsSelector: metav1.LabelSelector{MatchLabels: inject},
		},
		{
			name: "namespace selector",
			args: []string{"--set-json", `controller.namespaceSelector={"matchLabels":{"team":"a"},"matchExpressions":[{"key":"tier","operator":"In","values":["web","api"]},{"key":"legacy","operator":"DoesNotExist"}]}`},
			want: []string{"--namespace-selector=team=a,tier in (web,api),!legacy"},
			not:  []string{"--pod-selector", "--namespace="},
			role: "ClusterRole", namespaces: true,
			nsSelector: metav1.LabelSelector{
				MatchLabels: map[string]string{"probed.io/readiness-gate-inject": "enabled", "team": "a"},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}},
					{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist},
				},
			},
		},
		{
			name:       "pod selector",
			args:       []string{"--set-json", `controller.podSelector={"matchLabels":{"app":"web","probed.io/gated":"yes"},"matchExpressions":[{"key":"tier","operator":"NotIn","values":["db"]},{"key":"canary","operator":"Exists"}]}`},
			want:       []string{"--pod-selector=app=web,probed.io/gated=yes,tier notin (db),canary"},
			not:        []string{"--namespace-selector"},
			role:       "ClusterRole",
			nsSelector: metav1.LabelSelector{MatchLabels: inject},
			objects: &metav1.LabelSelector{
				MatchLabels: map[string]string{"app": "web", "probed.io/gated": "yes"},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}},
					{Key: "canary", Operator: metav1.LabelSelectorOpExists},
				},
			},
		},
		{
			name:       "one namespace",
			args:       []string{"--set", "controller.watchNamespace=apps"},
			want:       []string{"--namespace=apps"},
			not:        []string{"--namespace-selector"},
			role:       "Role",
			nsSelector: metav1.LabelSelector{MatchLabels: map[string]string{"probed.io/readiness-gate-inject": "enabled", "kubernetes.io/metadata.name": "apps"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, tt.args...)
			probed, controller := pods(t, r)
			args := controller.Spec.Containers[0].Args
			for _, a := range tt.want {
				if !slices.Contains(args, a) {
					t.Errorf("the controller's args lack %s: %q", a, args)
				}
			}
			for _, f := range tt.not {
				if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, f) }) {
					t.Errorf("the controller's args have %s: %q", f, args)
				}
			}
			for _, a := range tt.probed {
				if !slices.Contains(probed.Spec.Containers[0].Args, a) {
					t.Errorf("probed's args lack %s: %q", a, probed.Spec.Containers[0].Args)
				}
			}

			role := convert[rbacv1.ClusterRole](t, r.Find(tt.role, controllerName)) // a Role's rules are the same shape
			reads := slices.ContainsFunc(role.Rules, func(rule rbacv1.PolicyRule) bool { return slices.Contains(rule.Resources, "namespaces") })
			if reads != tt.namespaces {
				t.Errorf("%s has a rule on namespaces: %v; want %v (%+v)", tt.role, reads, tt.namespaces, role.Rules)
			}
			for _, rule := range role.Rules {
				if slices.Contains(rule.Resources, "namespaces") && !cmp.Equal(rule.Verbs, []string{"get", "list", "watch"}) {
					t.Errorf("namespaces: verbs %v; want get, list, watch", rule.Verbs)
				}
			}

			mwc := convert[admissionv1.MutatingWebhookConfiguration](t, r.Find("MutatingWebhookConfiguration", controllerName))
			wh := mwc.Webhooks[0]
			if diff := cmp.Diff(&tt.nsSelector, wh.NamespaceSelector); diff != "" {
				t.Errorf("the webhook's namespaceSelector (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.objects, wh.ObjectSelector); diff != "" {
				t.Errorf("the webhook's objectSelector (-want +got):\n%s", diff)
			}
		})
	}
}
