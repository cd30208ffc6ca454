package main

import (
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/refused"
	"github.com/probed/probed/internal/testpki"
)

// TestClusterReplicaCertUsage: under mutual TLS a replica presents its
// --tls-cert to the others when it forwards a call; one issued for
// serverAuth only would make every forward fail for ever, so the replica
// refuses to start, saying why. One issued for both starts.
func TestClusterReplicaCertUsage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs probed")
	}
	t.Parallel()
	etcd := etcdtest.Start(t)
	bin := buildProbed(t)
	p := newPKI(t)
	for _, tc := range []struct {
		name string
		pair testpki.KeyPair
		want string // "" : serves
	}{
		{"ServerAuthOnly", p.ca.Server(t, "r1"), "its extended key usage lacks clientAuth"},
		{"ServerAndClientAuth", p.ca.Replica(t, "r2"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert, key := tc.pair.Write(t, p.dir, tc.name)
			proc := &crashProcess{t: t, bin: bin, args: []string{"--addr", refused.Reserve(t).Addr(), "--store", "etcd",
				"--etcd-endpoints", etcd.Endpoints()[0], "--replica-id", tc.name, "--lease-ttl", "2s", "--metrics-addr", "",
				"--tls-cert", cert, "--tls-key", key, "--client-ca", p.clientCAFile}}
			t.Cleanup(func() { proc.kill() })
			proc.startAsync()
			select {
			case err := <-proc.exited:
				proc.cmd = nil
				switch log := proc.stderr.String(); {
				case tc.want == "":
					t.Errorf("exited (%v), want it to serve:\n%s", err, log)
				case err == nil || !strings.Contains(log, tc.want):
					t.Errorf("exited with %v, want an error saying %q:\n%s", err, tc.want, log)
				}
			case <-proc.serving:
				if tc.want != "" {
					t.Errorf("serving, want it to refuse: %s", tc.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("neither served nor exited in 30s:\n%s", proc.stderr.String())
			}
		})
	}
}
