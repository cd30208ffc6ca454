package etcdtest

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

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/procs"
)

// MemberEnv names the environment variable that makes a binary calling
// RunMemberIfAsked an etcd member: name, data directory, client URL,
// peer URL and the initial cluster, separated by spaces.
const MemberEnv = "PROBED_ETCDTEST_MEMBER"

// RunMemberIfAsked runs an etcd member until the process is killed when
// MemberEnv is set, and returns otherwise. A test binary that starts
// Processes calls it first thing in its TestMain: its members are
// processes of that binary, so that one can be paused (SIGSTOP) and
// killed without a separate etcd binary to build.
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
	cfg.InitialClusterToken = "probed-etcdtest"
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

// ProcessOptions say how to start Processes.
type ProcessOptions struct {
	// Self is the binary that calls RunMemberIfAsked (os.Args[0] of a
	// test binary); Dir holds the members' data directories.
	Self, Dir string
	// Members is the size of the cluster.
	Members int
	// Addr returns a free loopback address for a member's client or peer
	// URL (both are named before any member starts).
	Addr func() (string, error)
}

// Processes is an etcd cluster whose members are processes (of
// ProcessOptions.Self): unlike Cluster's, a member can be paused with
// SIGSTOP, as a machine that stalls, and killed and restarted from its
// data directory. The members get SIGKILL when the process that started
// them dies.
type Processes struct {
	self    string
	initial string
	members []*member
}

// member is one etcd member process.
type member struct {
	name, dir, client, peer string
	child                   *procs.Child // nil while it does not run
}

// StartProcesses starts the members and waits up to a minute for a
// leader.
func StartProcesses(ctx context.Context, opts ProcessOptions) (*Processes, error) {
	c := &Processes{self: opts.Self}
	var initial []string
	for i := range opts.Members {
		client, err := opts.Addr()
		if err != nil {
			return nil, err
		}
		peer, err := opts.Addr()
		if err != nil {
			return nil, err
		}
		m := &member{name: fmt.Sprintf("m%d", i), dir: filepath.Join(opts.Dir, fmt.Sprintf("etcd-m%d", i)), client: "http://" + client, peer: "http://" + peer}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peer)
	}
	c.initial = strings.Join(initial, ",")
	for i := range c.members {
		if err := c.Start(i); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if _, err := c.Leader(ctx, time.Minute); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Name is member i's name.
func (c *Processes) Name(i int) string { return c.members[i].name }

// Len is the number of members.
func (c *Processes) Len() int { return len(c.members) }

// Start (re)starts member i from its data directory; it must not run.
func (c *Processes) Start(i int) error {
	m := c.members[i]
	cmd := exec.Command(c.self, "-test.run=^$")
	cmd.Env = append(os.Environ(), MemberEnv+"="+strings.Join([]string{m.name, m.dir, m.client, m.peer, c.initial}, " "))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	child, err := procs.Start(cmd)
	if err != nil {
		return fmt.Errorf("etcd member %s: %w", m.name, err)
	}
	m.child = child
	return nil
}

// Kill ends member i with SIGKILL (a paused one too) and waits until it
// has exited.
func (c *Processes) Kill(i int) {
	if m := c.members[i]; m.child != nil {
		_ = m.child.Kill()
		m.child = nil
	}
}

// Signal sends sig to member i (SIGSTOP pauses it, SIGCONT continues it).
func (c *Processes) Signal(i int, sig syscall.Signal) error {
	m := c.members[i]
	if m.child == nil {
		return fmt.Errorf("etcd member %s does not run", m.name)
	}
	return m.child.Signal(sig)
}

// Endpoints are the members' client URLs.
func (c *Processes) Endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.client)
	}
	return out
}

// Leader waits up to limit for a member that says it leads and returns
// its index.
func (c *Processes) Leader(ctx context.Context, limit time.Duration) (int, error) {
	leader := -1
	err := poll.Every(50*time.Millisecond).Wait("an etcd leader", limit, func() bool {
		for i, m := range c.members {
			if ctx.Err() != nil || m.leads(ctx) {
				leader = i
				return true
			}
		}
		return false
	})
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	return leader, err
}

// leads reports whether the member says it is the leader.
func (m *member) leads(ctx context.Context) bool {
	cli, err := NewClient(m.client)
	if err != nil {
		return false
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := cli.Status(ctx, m.client)
	return err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId
}

// Stop kills every member.
func (c *Processes) Stop() {
	for i := range c.members {
		c.Kill(i)
	}
}

// NewClient is a quiet client of endpoints, for code with no test at hand
// (ClientOf closes its client when the test ends).
func NewClient(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
	})
}
