package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunCommandLine(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "help", args: []string{"--help"}, code: 0, want: "--kubeconfig"},
		{name: "unknown flag", args: []string{"--nope"}, code: 2, want: "unknown flag"},
		{name: "argument", args: []string{"extra"}, code: 2, want: "unexpected arguments"},
		{name: "no cluster", args: []string{"--kubeconfig="}, code: 1, want: "no --kubeconfig and not in a cluster"},
		{name: "bad kubeconfig", args: []string{"--kubeconfig=/nonexistent/kubeconfig"}, code: 1, want: "/nonexistent/kubeconfig"},
		{name: "version", args: []string{"--version"}, code: 0, want: "probed-kube "},
		{name: "bad log level", args: []string{"--log-level=loud"}, code: 2, want: "--log-level"},
		{name: "bad log format", args: []string{"--log-format=xml"}, code: 2, want: "--log-format"},
		{name: "bad namespace selector", args: []string{"--namespace-selector=a in b"}, code: 2, want: "--namespace-selector"},
		{name: "bad pod selector", args: []string{"--pod-selector=!!"}, code: 2, want: "--pod-selector"},
		{name: "json log", args: []string{"--log-format=json", "--kubeconfig="}, code: 1, want: `"level":"ERROR"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			var out, errOut bytes.Buffer
			if code := run(t.Context(), tt.args, &out, &errOut); code != tt.code {
				t.Errorf("exit %d; want %d\n%s", code, tt.code, errOut.String())
			}
			if got := out.String() + errOut.String(); !strings.Contains(got, tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, got)
			}
		})
	}
}
