package clustersoak

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// MemberEnv names the environment variable that makes a binary calling
// RunMemberIfAsked an etcd member: name, data directory, client URL,
// peer URL and the initial cluster, separated by spaces.
const MemberEnv = "PROBED_SOAK_ETCD_MEMBER"

// RunMemberIfAsked runs an etcd member until the process is killed when
// MemberEnv is set, and returns otherwise. The soak runs its etcd members
// as processes of the binary that calls it first thing (the test
// binary's TestMain), so that a member can be paused (SIGSTOP) and killed
// without a separate etcd binary to build.
func RunMemberIfAsked() {
	spec := os.Getenv(MemberEnv)
	if spec == "" {
		return
	}
	f := strings.Fields(spec)
	if len(f) != 5 {
		fmt.Fprintf(os.Stderr, "%s=%q: want 5 fields\n", MemberEnv, spec)
		os.Exit(2)
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = f[0], f[1]
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	client, err1 := url.Parse(f[2])
	peer, err2 := url.Parse(f[3])
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = f[4]
	cfg.InitialClusterToken = "probed-soak"
	// etcd's default timing (100 ms heartbeat, 1 s election timeout): a
	// 1.5 s pause of the leader costs an election.
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	err = <-e.Err()
	fmt.Fprintln(os.Stderr, "etcd member:", err)
	os.Exit(1)
}

// member is one etcd member process.
type member struct {
	name, dir, client, peer string
	cmd                     *exec.Cmd
	exited                  chan struct{}
}

// etcdCluster is the soak's etcd: member processes of self (a binary
// that calls RunMemberIfAsked).
type etcdCluster struct {
	self    string
	initial string
	members []*member
}

// startEtcd starts n members on free loopback ports and waits for a
// leader.
func startEtcd(ctx context.Context, self, dir string, n int) (*etcdCluster, error) {
	c := &etcdCluster{self: self}
	var initial []string
	for i := range n {
		client, err := freeAddr()
		if err != nil {
			return nil, err
		}
		peer, err := freeAddr()
		if err != nil {
			return nil, err
		}
		m := &member{name: fmt.Sprintf("m%d", i), dir: filepath.Join(dir, fmt.Sprintf("etcd-m%d", i)), client: "http://" + client, peer: "http://" + peer}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peer)
	}
	c.initial = strings.Join(initial, ",")
	for i := range c.members {
		if err := c.start(i); err != nil {
			c.stop()
			return nil, err
		}
	}
	if _, err := c.leader(ctx, 60*time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// start (re)starts member i from its data directory.
func (c *etcdCluster) start(i int) error {
	m := c.members[i]
	cmd := exec.Command(c.self, "-test.run=^$")
	cmd.Env = append(os.Environ(), MemberEnv+"="+strings.Join([]string{m.name, m.dir, m.client, m.peer, c.initial}, " "))
	cmd.Stderr = os.Stderr
	// A member never outlives the soak (a test timeout kills it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcd member %s: %w", m.name, err)
	}
	m.cmd, m.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(m.exited)
	return nil
}

// kill ends member i with SIGKILL and waits until it has exited.
func (c *etcdCluster) kill(i int) {
	m := c.members[i]
	_ = m.cmd.Process.Signal(syscall.SIGCONT)
	_ = m.cmd.Process.Kill()
	<-m.exited
}

func (c *etcdCluster) signal(i int, sig syscall.Signal) error {
	return c.members[i].cmd.Process.Signal(sig)
}

// endpoints are the members' client URLs.
func (c *etcdCluster) endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.client)
	}
	return out
}

// leader waits up to limit for a member that says it leads and returns
// its index.
func (c *etcdCluster) leader(ctx context.Context, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for {
		for i, m := range c.members {
			if i, ok := c.leads(ctx, i, m); ok {
				return i, nil
			}
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no etcd leader within %v", limit)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return -1, err
		}
	}
}

func (c *etcdCluster) leads(ctx context.Context, i int, m *member) (int, bool) {
	cli, err := newEtcdClient(m.client)
	if err != nil {
		return -1, false
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := cli.Status(ctx, m.client)
	return i, err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId
}

// stop kills every member.
func (c *etcdCluster) stop() {
	for i, m := range c.members {
		if m.cmd != nil {
			c.kill(i)
		}
	}
}

// newEtcdClient is a client of endpoints, quiet.
func newEtcdClient(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
	})
}
