package chart_test

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/probed/probed/internal/probedproc"
)

// TestProbedAcceptsChartArgs runs the real probed binary with the args
// the chart renders for it (files written where its volumes mount) and
// --print-config, which parses and checks every flag as serving does and
// exits: the chart cannot render a command line probed refuses.
// TestChartArgsAccepted (kube/cmd/probed-kube) does the same for the
// controller.
func TestProbedAcceptsChartArgs(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bin, err := probedproc.Build(ctx, t.TempDir(), t.Output())
	if err != nil {
		t.Fatal(err)
	}
	etcdClient := map[string]map[string][]byte{"etcd-client": {"ca.crt": []byte("ca"), "tls.crt": []byte("crt"), "tls.key": []byte("key")}}
	tests := []struct {
		name    string
		set     string
		secrets map[string]map[string][]byte
	}{
		{name: "default"},
		{name: "text logs", set: "probed.logLevel=debug,probed.logFormat=text,probed.minPeriod=50ms"},
		{name: "etcd with TLS", set: "probed.store=etcd,probed.etcd.endpoints=https://etcd-0:2379\\,https://etcd-1:2379,probed.replicas=3,probed.etcd.tls.existingSecret=etcd-client", secrets: etcdClient},
		{name: "etcd, CA only", set: "probed.store=etcd,probed.etcd.endpoints=https://etcd:2379,probed.etcd.tls.existingSecret=etcd-client,probed.etcd.tls.clientCertificate=false", secrets: etcdClient},
		{name: "no prometheus, a rule of mine", set: "auth.prometheus.enabled=false,auth.extraRules[0].identities[0]=ops,auth.extraRules[0].names[0]=apps/,auth.extraRules[0].verbs[0]=read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := renderSet(t, tt.set)
			pod, err := r.PodSpec("StatefulSet", probedName)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			local, err := r.Prepare(pod, "probed", dir, map[string]string{"POD_NAME": "probed-0"}, tt.secrets, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, append(local.Args, "--print-config")...)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("probed refuses the chart's args %q: %v\n%s", local.Args, err, out.String())
			}
		})
	}
}
