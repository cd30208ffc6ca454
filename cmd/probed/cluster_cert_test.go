package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/probedproc"
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
			err := proc.wait()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%v, want it to serve", err)
			case tc.want != "" && err == nil:
				t.Errorf("serving, want it to refuse: %s", tc.want)
			case tc.want != "" && (!errors.Is(err, probedproc.ErrExited) || proc.last.Err() == nil || !strings.Contains(proc.log(), tc.want)):
				t.Errorf("%v, want it to exit with an error saying %q", err, tc.want)
			}
		})
	}
}
