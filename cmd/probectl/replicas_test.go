package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
)

func TestReplicasCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("single probed", func(t *testing.T) {
		s, _ := server(t)
		r := probectl(ctx, s.Addr, "", "replicas")
		if r.code != 0 || !strings.Contains(r.out, s.Addr) || !strings.Contains(r.out, "all") {
			t.Errorf("replicas = %d %q %q; want one row, this server's address, all shards", r.code, r.out, r.err)
		}
	})

	t.Run("cluster", func(t *testing.T) {
		rs := probedtest.StartReplicas(t, 2, probedtest.Options{})
		r := probectl(ctx, rs.Addrs(), "", "replicas")
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[1], "r0") || !strings.HasPrefix(lines[2], "r1") {
			t.Fatalf("replicas = %d %q %q; want a header and r0, r1", r.code, r.out, r.err)
		}
		// list -o wide names the replica that probes each target.
		for _, name := range []string{"r0-web", "r1-web"} {
			if r := probectl(ctx, rs.Addrs(), "name: "+name+"\n", "apply", "-f", "-"); r.code != 0 {
				t.Fatalf("apply %s: %q", name, r.err)
			}
		}
		var out string
		poll.Until(t, "r1-web in replica 0's view of the shared store", 10*time.Second, func() bool {
			out = probectl(ctx, rs.Servers[0].Addr, "", "list", "-o", "wide").out
			return strings.Contains(out, "r1-web")
		})
		for _, row := range strings.Split(out, "\n")[1:] {
			f := strings.Fields(row)
			if len(f) == 0 {
				continue
			}
			if want := f[0][:2]; !strings.Contains(row, " "+want+" ") {
				t.Errorf("row %q does not name replica %s", row, want)
			}
		}
	})
}
