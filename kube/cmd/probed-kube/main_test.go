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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			var errOut bytes.Buffer
			if code := run(t.Context(), tt.args, &errOut); code != tt.code {
				t.Errorf("exit %d; want %d\n%s", code, tt.code, errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, errOut.String())
			}
		})
	}
}
