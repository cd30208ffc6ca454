// Package controlplane runs a real Kubernetes control plane for tests:
// etcd, kube-apiserver and kube-controller-manager (its EndpointSlice and
// Endpoints controllers), as processes on loopback, from binaries built by
// kube/controlplane/build.sh (`make kube-bins`).
package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// Version is the Kubernetes version build.sh builds.
const Version = "v1.37.2"

// Users the API server knows, each by its bearer token (Plane.Config).
const (
	// Admin is in system:masters: every permission.
	Admin = "admin"
	// Controller is a user with no permission until a test grants it
	// some, as the Helm chart's RBAC does for probed-kube's service
	// account.
	Controller = "probed-kube"
	// Nobody never gets a permission.
	Nobody = "nobody"
)

// binaries are the programs the control plane needs.
var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// BinDir returns the directory of the binaries: $PROBED_KUBE_BIN, or the
// cache directory build.sh fills by default. missing lists the binaries
// not found there.
func BinDir() (dir string, missing []string) {
	dir = os.Getenv("PROBED_KUBE_BIN")
	if dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(cache, "probed", "kube-"+Version)
	}
	for _, b := range binaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return dir, missing
}

// Plane is a running control plane.
type Plane struct {
	// URL is the API server's, https://127.0.0.1:port.
	URL string
	// Dir holds the data, certificates and each process's log.
	Dir string

	procs []*process // in start order
}

type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
}

// DefaultControllers are the kube-controller-manager controllers Start
// runs: EndpointSlices and Endpoints follow pods' Ready, and PodDisruption
// Budgets' status is kept (evictions consult it).
var DefaultControllers = []string{"endpointslice-controller", "endpoints-controller", "disruption-controller"}

// Options change what StartWith runs.
type Options struct {
	// Controllers are kube-controller-manager's (its --controllers);
	// empty: DefaultControllers.
	Controllers []string
}

// Start starts etcd, kube-apiserver and kube-controller-manager from the
// binaries in bin, with their data and logs under dir, and returns once
// the API server is ready. On error nothing is left running.
func Start(ctx context.Context, bin, dir string) (*Plane, error) {
	return StartWith(ctx, bin, dir, Options{})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, bin, dir string, opts Options) (_ *Plane, err error) {
	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = DefaultControllers
	}
	p := &Plane{Dir: dir}
	defer func() {
		if err != nil {
			p.Stop()
			err = fmt.Errorf("%w\n%s", err, p.Logs(20))
		}
	}()
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	clientURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	if err := p.start(bin, "etcd",
		"--name=default", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync", "--log-level=error",
	); err != nil {
		return nil, err
	}

	key, err := writeServiceAccountKey(filepath.Join(dir, "sa.key"))
	if err != nil {
		return nil, err
	}
	tokens := filepath.Join(dir, "tokens.csv")
	var csv strings.Builder
	for _, u := range []string{Admin, Controller, Nobody} {
		group := ""
		if u == Admin {
			group = ",system:masters"
		}
		fmt.Fprintf(&csv, "%s,%s,%s-uid%s\n", token(u), u, u, group)
	}
	if err := os.WriteFile(tokens, []byte(csv.String()), 0o600); err != nil {
		return nil, err
	}
	p.URL = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := p.start(bin, "kube-apiserver",
		"--etcd-servers="+clientURL,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		// 127.0.0.1 is refused as a public address unless the endpoint
		// reconciler is off (TOOLCHAIN.md §8).
		"--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+key, "--service-account-signing-key-file="+key,
		"--token-auth-file="+tokens,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		// 2,000 pods patched at once must not queue behind the defaults.
		"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
	); err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "controller-manager.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(p.kubeconfig(Admin)), 0o600); err != nil {
		return nil, err
	}
	kcm := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--use-service-account-credentials=false", "--leader-elect=false", "--secure-port=0",
		"--kube-api-qps=1000", "--kube-api-burst=2000",
	}
	// More flags for a benchmark that compares kube-controller-manager's
	// settings (its defaults otherwise, as a platform team's cluster has).
	kcm = append(kcm, strings.Fields(os.Getenv(ControllerManagerFlagsEnv))...)
	if err := p.start(bin, "kube-controller-manager", kcm...); err != nil {
		return nil, err
	}
	return p, nil
}

// ControllerManagerFlagsEnv names the environment variable whose
// space-separated flags are added to kube-controller-manager's (for
// benchmarks, e.g. --endpointslice-updates-batch-period=100ms).
const ControllerManagerFlagsEnv = "PROBED_KUBE_KCM_FLAGS"

// Config returns a client configuration of the API server as user (Admin,
// Controller or Nobody), with a QPS high enough for tests with thousands
// of pods.
func (p *Plane) Config(user string) *rest.Config {
	return &rest.Config{
		Host:            p.URL,
		BearerToken:     token(user),
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             1000,
		Burst:           2000,
	}
}

// Kubeconfig writes a kubeconfig file of the API server as user into the
// plane's directory and returns its path.
func (p *Plane) Kubeconfig(user string) (string, error) {
	path := filepath.Join(p.Dir, user+".kubeconfig")
	return path, os.WriteFile(path, []byte(p.kubeconfig(user)), 0o600)
}

func (p *Plane) kubeconfig(user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: %s
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: %s}
current-context: test
`, p.URL, user, token(user), user)
}

// token is user's bearer token.
func token(user string) string { return "token-of-" + user }

// Stop stops the processes, the last started first, and waits for them.
func (p *Plane) Stop() {
	for i := len(p.procs) - 1; i >= 0; i-- {
		pr := p.procs[i]
		_ = pr.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-pr.done:
		case <-time.After(10 * time.Second):
			_ = pr.cmd.Process.Kill()
			<-pr.done
		}
	}
	p.procs = nil
}

// Pids returns the process id of each running process, by name.
func (p *Plane) Pids() map[string]int {
	pids := map[string]int{}
	for _, pr := range p.procs {
		pids[pr.name] = pr.cmd.Process.Pid
	}
	return pids
}

// Logs returns the last n lines of each process's log.
func (p *Plane) Logs(n int) string {
	var b strings.Builder
	for _, name := range binaries {
		data, err := os.ReadFile(filepath.Join(p.Dir, name+".log"))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "--- %s (last %d lines)\n%s\n", name, n, strings.Join(lines[max(0, len(lines)-n):], "\n"))
	}
	return b.String()
}

// start starts one binary, logging to dir/name.log.
func (p *Plane) start(bin, name string, args ...string) error {
	log, err := os.Create(filepath.Join(p.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Stdout, cmd.Stderr = log, log
	// The processes die with the test binary, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	pr := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { // owned by Stop, which waits for done
		pr.err = cmd.Wait()
		_ = log.Close()
		close(pr.done)
	}()
	p.procs = append(p.procs, pr)
	return nil
}

// waitReady polls the API server's /readyz until it answers ok.
func (p *Plane) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test's own API server, self-signed
	}}
	defer hc.CloseIdleConnections()
	api := p.procs[len(p.procs)-1]
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token(Admin))
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-api.done:
			return fmt.Errorf("kube-apiserver exited: %w", api.err)
		case <-ctx.Done():
			return errors.New("kube-apiserver not ready within 90 s")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freePorts returns n ports that were free on 127.0.0.1 a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var lis []net.Listener
	defer func() {
		for _, l := range lis {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lis = append(lis, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeServiceAccountKey writes a new RSA key, PEM, to path.
func writeServiceAccountKey(path string) (string, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	der := x509.MarshalPKCS1PrivateKey(k)
	return path, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), 0o600)
}
