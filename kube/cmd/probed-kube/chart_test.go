package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/probed/probed/kube/internal/release"
)

// TestChartArgsAccepted renders the chart (deploy/helm/probed) with
// several value sets and parses its controller's args with probed-kube's
// own flags and checks (selectors, log settings): the chart cannot
// render a command line the controller refuses, and each value arrives
// as the controller reads it (helm's numbers included).
func TestChartArgsAccepted(t *testing.T) {
	type parsed struct {
		Namespace, NamespaceSelector, PodSelector string
		LogLevel, LogFormat                       string
		QPS                                       float32
		Burst, Workers                            int
		MinInterval, Resync                       time.Duration
		Webhook                                   string
	}
	defaults := parsed{LogLevel: "info", LogFormat: "json", QPS: 200, Burst: 400, Workers: 8, MinInterval: time.Second, Resync: 5 * time.Minute, Webhook: ":9443"}
	tests := []struct {
		name string
		args []string
		want parsed
	}{
		{name: "default", want: defaults},
		{
			name: "every value",
			args: []string{
				"--set", "controller.logLevel=debug,controller.logFormat=text,controller.kubeAPI.qps=50.5,controller.kubeAPI.burst=1000000,controller.workers=32,controller.conditionMinInterval=250ms,controller.resync=1h30m",
				"--set-json", `controller.namespaceSelector={"matchLabels":{"team":"a"},"matchExpressions":[{"key":"tier","operator":"In","values":["web","api"]},{"key":"legacy","operator":"DoesNotExist"},{"key":"env","operator":"NotIn","values":["dev"]},{"key":"owner","operator":"Exists"}]}`,
				"--set-json", `controller.podSelector={"matchLabels":{"app.kubernetes.io/name":"web"}}`,
			},
			want: parsed{
				NamespaceSelector: "env notin (dev),!legacy,owner,team=a,tier in (api,web)", PodSelector: "app.kubernetes.io/name=web",
				LogLevel: "debug", LogFormat: "text", QPS: 50.5, Burst: 1000000, Workers: 32,
				MinInterval: 250 * time.Millisecond, Resync: 90 * time.Minute, Webhook: ":9443",
			},
		},
		{
			// A values file's numbers are floats to helm: 1000000 would
			// print as 1e+06, which an int flag refuses.
			name: "values file",
			args: []string{"-f", writeValues(t, "controller: {kubeAPI: {qps: 1000000, burst: 1000000}, workers: 1000}")},
			want: func() parsed {
				p := defaults
				p.QPS, p.Burst, p.Workers = 1e6, 1e6, 1000
				return p
			}(),
		},
		{name: "one namespace, no webhook", args: []string{"--set", "controller.watchNamespace=apps,controller.webhook.enabled=false"}, want: func() parsed {
			p := defaults
			p.Namespace, p.Webhook = "apps", ""
			return p
		}()},
	}
	root, err := release.Root(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := release.Render(t.Context(), root, "probed", "probed-system", tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			pod, err := r.PodSpec("Deployment", "probed-kube")
			if err != nil {
				t.Fatal(err)
			}
			args := pod.Spec.Containers[0].Args
			fs, o := flags(io.Discard)
			if err := fs.Parse(args); err != nil {
				t.Fatalf("probed-kube refuses the chart's args %q: %v", args, err)
			}
			if fs.NArg() > 0 {
				t.Fatalf("arguments that are no flags: %q", fs.Args())
			}
			scope, err := o.scope()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := newLogger(io.Discard, o.logLevel, o.logFormat); err != nil {
				t.Fatal(err)
			}
			got := parsed{
				Namespace: scope.Namespace, LogLevel: o.logLevel, LogFormat: o.logFormat,
				QPS: o.qps, Burst: o.burst, Workers: o.workers, MinInterval: o.minInterval, Resync: o.resync, Webhook: o.webhookAddr,
			}
			if scope.NamespaceSelector != nil {
				got.NamespaceSelector = scope.NamespaceSelector.String()
			}
			if scope.PodSelector != nil {
				got.PodSelector = scope.PodSelector.String()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parsed (-want +got):\n%s\nargs %q", diff, args)
			}
		})
	}
}

// writeValues writes a values file and returns its path.
func writeValues(t *testing.T, values string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
