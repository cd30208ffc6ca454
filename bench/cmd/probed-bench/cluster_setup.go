package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/internal/procs"
)

// etcdPackage is the etcd server the cluster benchmark builds, at the
// version probed's go.mod pins (as make cluster does).
const etcdPackage = "go.etcd.io/etcd/server/v3"

// etcdProc is an etcd cluster running as child processes: one or more
// members on loopback, fsync on (etcd's defaults), data in a temporary
// directory.
type etcdProc struct {
	children []*procs.Child // none for an etcd the benchmark did not start
	endpoint string         // host:port of each member's client URL, comma-separated
}

// etcdBinary returns bin, or when it is empty an etcd built into dir.
func etcdBinary(ctx context.Context, bin, dir string, stderr io.Writer) (string, error) {
	if bin != "" {
		return bin, nil
	}
	fmt.Fprintf(stderr, "cluster: building %s\n", etcdPackage)
	bin = filepath.Join(dir, "etcd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, etcdPackage)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s (run inside the repository, or pass --etcd-bin): %w", etcdPackage, err)
	}
	return bin, nil
}

// startEtcd starts a cluster of members processes of bin on free loopback
// ports, with their data in dir, and waits until every member reports
// healthy.
func startEtcd(ctx context.Context, bin, dir string, members int, stderr io.Writer) (*etcdProc, error) {
	clients := make([]string, members)
	peers := make([]string, members)
	var initial []string
	for i := range members {
		var err error
		if clients[i], err = probedproc.FreeAddr(); err != nil {
			return nil, err
		}
		if peers[i], err = probedproc.FreeAddr(); err != nil {
			return nil, err
		}
		initial = append(initial, fmt.Sprintf("bench%d=http://%s", i, peers[i]))
	}
	e := &etcdProc{endpoint: strings.Join(clients, ",")}
	for i := range members {
		name := fmt.Sprintf("bench%d", i)
		cmd := exec.Command(bin, "--name="+name, "--data-dir="+filepath.Join(dir, "etcd-"+name),
			"--listen-client-urls=http://"+clients[i], "--advertise-client-urls=http://"+clients[i],
			"--listen-peer-urls=http://"+peers[i], "--initial-advertise-peer-urls=http://"+peers[i],
			"--initial-cluster="+strings.Join(initial, ","), "--initial-cluster-state=new", "--log-level=error")
		cmd.Stdout, cmd.Stderr = stderr, stderr
		c, err := procs.Start(cmd)
		if err != nil {
			_ = e.stop()
			return nil, err
		}
		e.children = append(e.children, c)
	}
	limit := time.Now().Add(30 * time.Second)
	for i, client := range clients {
		for !healthy(ctx, "http://"+client+"/health") {
			if time.Now().After(limit) {
				_ = e.stop()
				return nil, fmt.Errorf("etcd member %d not healthy within 30s", i)
			}
			select {
			case <-e.children[i].Exited():
				_ = e.stop()
				return nil, fmt.Errorf("etcd member %d exited at start: %w", i, e.children[i].Err())
			case <-ctx.Done():
				_ = e.stop()
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return e, nil
}

// healthy reports whether url answers 200.
func healthy(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// pids returns the process ids of etcd's members, none when the benchmark
// uses an etcd it did not start.
func (e *etcdProc) pids() []int {
	var out []int
	for _, c := range e.children {
		out = append(out, c.Pid())
	}
	return out
}

// stop ends etcd's members (SIGTERM, then SIGKILL after 10s).
func (e *etcdProc) stop() error {
	var errs []error
	for _, c := range e.children {
		if err := c.Stop(10 * time.Second); errors.Is(err, procs.ErrKilled) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// probedCluster is N probed replicas over one etcd, under a key prefix
// of their own (each measurement starts from an empty cluster).
type probedCluster struct {
	opts     probedOptions // of every replica, without --replica-id
	replicas []*probedProc
	ids      []string
}

// clusterOptions are the settings of the replicas of one measurement.
type clusterOptions struct {
	bin       string
	dir       string // parent of the replicas' (unused) data directories
	endpoint  string
	prefix    string
	leaseTTL  time.Duration
	settle    time.Duration // 0: probed's default, 2 × leaseTTL
	minPeriod time.Duration
	pprof     bool // run the replicas with --pprof
}

// startCluster starts n replicas, r1…rn, one after the other, and waits
// until every shard has an owner and every replica owns some.
func startCluster(ctx context.Context, o clusterOptions, n int, stderr io.Writer) (*probedCluster, error) {
	c := &probedCluster{opts: probedOptions{bin: o.bin, dataDir: o.dir, minPeriod: o.minPeriod, extra: []string{
		"--store=etcd", "--etcd-endpoints=" + o.endpoint, "--etcd-prefix=" + o.prefix,
		"--lease-ttl=" + o.leaseTTL.String(), "--max-targets=0",
	}}}
	if o.settle > 0 {
		c.opts.extra = append(c.opts.extra, "--settle="+o.settle.String())
	}
	if o.pprof {
		c.opts.extra = append(c.opts.extra, "--pprof")
	}
	for i := range n {
		c.ids = append(c.ids, fmt.Sprintf("r%d", i+1))
		c.replicas = append(c.replicas, nil)
		if err := c.start(ctx, i, stderr); err != nil {
			c.stop()
			return nil, err
		}
	}
	if err := c.waitBalanced(ctx, 4*o.leaseTTL+30*time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// start (re)starts replica i.
func (c *probedCluster) start(ctx context.Context, i int, stderr io.Writer) error {
	opts := c.opts
	opts.dataDir = filepath.Join(c.opts.dataDir, c.ids[i])
	opts.extra = append(append([]string(nil), opts.extra...), "--replica-id="+c.ids[i])
	p, err := startProbed(ctx, opts, stderr)
	if err != nil {
		return fmt.Errorf("replica %s: %w", c.ids[i], err)
	}
	c.replicas[i] = p
	return nil
}

// kill ends replica i with SIGKILL and returns when it was sent.
func (c *probedCluster) kill(i int) (time.Time, error) {
	p := c.replicas[i]
	_ = p.client.Close()
	at := time.Now()
	err := p.Kill()
	c.replicas[i] = nil
	return at, err
}

// alive returns the replicas running now.
func (c *probedCluster) alive() []*probedProc {
	var out []*probedProc
	for _, p := range c.replicas {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// waitBalanced waits until every running replica is a member owning some
// shards and every shard has an owner.
func (c *probedCluster) waitBalanced(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	live := c.alive()
	var last string
	for {
		resp, err := live[0].client.Replicas(ctx)
		if err == nil {
			owned, every := int32(0), len(resp.GetReplicas()) == len(live)
			for _, r := range resp.GetReplicas() {
				owned += r.GetShards()
				every = every && r.GetShards() > 0
			}
			if every && owned == resp.GetShards() {
				return nil
			}
			last = fmt.Sprintf("%d members, %d of %d shards owned", len(resp.GetReplicas()), owned, resp.GetShards())
		} else {
			last = err.Error()
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("cluster not balanced within %v: %s", limit, last)
		}
	}
}

// owners returns the replica id of every target with labels, by name.
func (c *probedCluster) owners(ctx context.Context, labels map[string]string) (map[string]string, error) {
	ts, err := c.alive()[0].client.ListAll(ctx, labels)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ts))
	for _, t := range ts {
		out[t.GetName()] = t.GetStatus().GetReplica()
	}
	return out, nil
}

// clients returns a client of every running replica.
func (c *probedCluster) clients() []*client.Client {
	var out []*client.Client
	for _, p := range c.alive() {
		out = append(out, p.client)
	}
	return out
}

// stop stops every running replica.
func (c *probedCluster) stop() {
	for i, p := range c.replicas {
		if p != nil {
			_ = p.stop()
			c.replicas[i] = nil
		}
	}
}
