package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/internal/procs"
	"github.com/probed/probed/kube/internal/controlplane"
	"github.com/probed/probed/kube/internal/kubelet"
	"github.com/probed/probed/kube/internal/release"
)

// The demo's cluster.
const (
	releaseName = "probed"
	namespace   = "probed-system"
	podCIDR     = "10.244.0.1/16" // on the namespace's loopback; .0.1 is the node
	probedIP    = "10.244.0.2"    // probed's address
	nodeName    = "demo-node"
	tlsSecret   = "probed-demo-tls"
)

// chartValues are the values the demo renders the chart with, besides
// its defaults. probed's TLS Secret is the demo's own (tls.existingSecret),
// whose certificate also names probed's address here: a process has no
// Service DNS name. The webhook is off: the API server reaches a webhook
// through its Service's pods, and the demo runs the controller as
// processes, not pods (web.yaml lists the gate itself). No Prometheus
// runs, so no identity for it.
func chartValues() []string {
	return []string{"--set", "tls.existingSecret=" + tlsSecret + ",controller.webhook.enabled=false,auth.prometheus.enabled=false"}
}

// demo is the running demo.
type demo struct {
	opts    *options
	out     io.Writer
	kubectl net.Listener // outside the namespace; accepted connections go to the API server

	plane  *controlplane.Plane
	admin  *kubernetes.Clientset
	dyn    dynamic.Interface
	rel    *release.Release
	procs  []*process // probed and the controller's replicas, in start order
	stopFn []func()   // what stop runs, last added first
}

type process struct {
	name  string
	child *procs.Child
}

func (d *demo) run(ctx context.Context) error {
	defer d.stop()
	o := d.opts
	bin, _ := controlplane.BinDir()
	planeDir := filepath.Join(o.dir, "plane")
	if err := os.MkdirAll(planeDir, 0o700); err != nil {
		return err
	}
	logf(d.out, "starting etcd, kube-apiserver %s and kube-controller-manager (logs in %s) ...", controlplane.Version, planeDir)
	plane, err := controlplane.StartWith(ctx, bin, planeDir, controlplane.Options{
		Controllers: append(controlplane.DefaultControllers, "deployment-controller", "replicaset-controller"),
	})
	if err != nil {
		return err
	}
	d.plane = plane
	d.onStop(plane.Stop)
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		logf(d.out, "started %s (pid %d)", name, plane.Pids()[name])
	}
	if d.admin, err = kubernetes.NewForConfig(plane.Config(controlplane.Admin)); err != nil {
		return err
	}
	if d.dyn, err = dynamic.NewForConfig(plane.Config(controlplane.Admin)); err != nil {
		return err
	}
	kubeconfig, err := d.serveKubectl()
	if err != nil {
		return err
	}

	manifests, err := os.ReadFile(filepath.Join(o.dir, "chart.yaml"))
	if err != nil {
		return err
	}
	objs, err := release.Decode(manifests)
	if err != nil {
		return err
	}
	d.rel = &release.Release{Name: releaseName, Namespace: namespace, Manifests: manifests, Objects: objs}
	if err := d.install(ctx); err != nil {
		return err
	}
	kl, err := kubelet.Start(ctx, d.admin, nodeName)
	if err != nil {
		return err
	}
	d.onStop(kl.Stop)
	rt, err := startRuntime(ctx, d.admin, kl, d.out)
	if err != nil {
		return err
	}
	d.onStop(rt.stop)
	web, err := os.ReadFile(filepath.Join(o.dir, "web.yaml"))
	if err != nil {
		return err
	}
	webObjs, err := release.Decode(web)
	if err != nil {
		return err
	}
	if err := d.apply(ctx, webObjs, "default"); err != nil {
		return err
	}
	logf(d.out, "applied examples/kubernetes/web.yaml; in another terminal:")
	fmt.Fprintf(d.out, "\n  export KUBECONFIG=%s\n  kubectl get pods -o wide -A\n  kubectl get endpointslices -l kubernetes.io/service-name=web\n  kubectl get pod -l app=web -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[?(@.type==\"probed.io/ready\")].status}{\"\\n\"}{end}'\n\n", kubeconfig)
	f, err := startFlipper(ctx, d.admin, rt, d.out)
	if err != nil {
		return err
	}
	d.onStop(f.stop)
	var pods int
	for _, obj := range webObjs {
		if obj.GetKind() == "Deployment" {
			n, err := deploymentReplicas(obj)
			if err != nil {
				return err
			}
			pods += n
		}
	}
	return f.run(ctx, pods, o.flipEvery, o.flips)
}

// deploymentReplicas returns the replicas of a rendered Deployment (its
// numbers are floats in the decoded YAML: through its Go type).
func deploymentReplicas(obj *unstructured.Unstructured) (int, error) {
	if obj == nil {
		return 0, errors.New("no Deployment rendered")
	}
	var dep appsv1.Deployment
	if err := release.Convert(obj, &dep); err != nil {
		return 0, err
	}
	if dep.Spec.Replicas == nil {
		return 1, nil
	}
	return int(*dep.Spec.Replicas), nil
}

// onStop adds fn to what stop runs (last added first).
func (d *demo) onStop(fn func()) { d.stopFn = append(d.stopFn, fn) }

// stop stops every process and goroutine the demo started, the
// controller and probed first, the control plane last, and waits for
// them.
func (d *demo) stop() {
	logf(d.out, "stopping ...")
	for i := len(d.procs) - 1; i >= 0; i-- {
		p := d.procs[i]
		if err := p.child.Stop(15 * time.Second); err != nil && !isSignaled(err) {
			logf(d.out, "%s: %v", p.name, err)
		}
	}
	for i := len(d.stopFn) - 1; i >= 0; i-- {
		d.stopFn[i]()
	}
	logf(d.out, "stopped: every process the demo started has exited")
}

func isSignaled(err error) bool {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return true
		}
	}
	return false
}

// serveKubectl forwards the connections of the listener outside the
// namespace to the API server inside it, and writes the kubeconfig
// kubectl uses from outside.
func (d *demo) serveKubectl() (string, error) {
	api := strings.TrimPrefix(d.plane.URL, "https://")
	var wg sync.WaitGroup
	conns := &connSet{m: map[net.Conn]bool{}}
	wg.Go(func() {
		for {
			c, err := d.kubectl.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { conns.forward(c, api) })
		}
	})
	d.onStop(func() {
		_ = d.kubectl.Close()
		conns.closeAll()
		wg.Wait()
	})
	admin, err := d.plane.Kubeconfig(controlplane.Admin)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(admin)
	if err != nil {
		return "", err
	}
	path := filepath.Join(d.opts.dir, "kubeconfig")
	data = []byte(strings.ReplaceAll(string(data), d.plane.URL, "https://"+d.kubectl.Addr().String()))
	return path, os.WriteFile(path, data, 0o600)
}

// connSet are the forwarded connections, closed when the demo stops.
type connSet struct {
	mu sync.Mutex
	m  map[net.Conn]bool
}

func (s *connSet) forward(c net.Conn, addr string) {
	defer func() { _ = c.Close() }()
	up, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	if !s.add(c, up) {
		return
	}
	defer s.remove(c, up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }() // ends when either side closes
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
}

func (s *connSet) add(cs ...net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return false
	}
	for _, c := range cs {
		s.m[c] = true
	}
	return true
}

func (s *connSet) remove(cs ...net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		delete(s.m, c)
	}
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.m {
		_ = c.Close()
	}
	s.m = nil
}

// install applies what the chart renders but its workloads, whose
// containers the demo runs as processes with the chart's flags: probed
// first, then the controller's replicas, each with a token of the chart's
// ServiceAccount (so its RBAC is what they may do).
func (d *demo) install(ctx context.Context) error {
	if _, err := d.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	pki, err := newPKI(probedHosts(), probedIP)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"ca.crt": pki.ca, "tls.crt": pki.cert, "tls.key": pki.key},
	}
	if _, err := d.admin.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return err
	}
	secrets := map[string]map[string][]byte{tlsSecret: secret.Data}
	var rest []*unstructured.Unstructured
	for _, o := range d.rel.Objects {
		if k := o.GetKind(); k != "StatefulSet" && k != "Deployment" {
			rest = append(rest, o)
		}
	}
	if err := d.apply(ctx, rest, namespace); err != nil {
		return err
	}
	logf(d.out, "installed the chart's RBAC, Services, Secrets, policy and budget into %s", namespace)

	pod, err := d.rel.PodSpec("StatefulSet", releaseName)
	if err != nil {
		return err
	}
	dir := filepath.Join(d.opts.dir, "probed-0")
	local, err := d.rel.Prepare(pod, "probed", dir, map[string]string{"POD_NAME": "probed-0"}, secrets, map[string]string{
		"--addr":         net.JoinHostPort(probedIP, "50051"),
		"--metrics-addr": net.JoinHostPort(probedIP, "9464"),
		"--data-dir":     filepath.Join(dir, "data"),
	})
	if err != nil {
		return err
	}
	serving := probedproc.NewServing()
	if err := d.start(ctx, "probed", filepath.Join(d.opts.dir, "bin", "probed"), local.Args, serving); err != nil {
		return err
	}
	select {
	case <-serving.Done():
	case <-time.After(60 * time.Second):
		return fmt.Errorf("probed did not serve within 60 s (log: %s/probed.log)", d.opts.dir)
	case <-ctx.Done():
		return ctx.Err()
	}

	name := releaseName + "-kube"
	pod, err = d.rel.PodSpec("Deployment", name)
	if err != nil {
		return err
	}
	replicas, err := deploymentReplicas(d.rel.Find("Deployment", name))
	if err != nil {
		return err
	}
	for i := range replicas {
		id := fmt.Sprintf("%s-%d", name, i)
		dir := filepath.Join(d.opts.dir, id)
		kubeconfig, err := d.serviceAccountKubeconfig(ctx, name, dir)
		if err != nil {
			return err
		}
		health, err := freePort()
		if err != nil {
			return err
		}
		local, err := d.rel.Prepare(pod, "probed-kube", dir, map[string]string{"POD_NAME": id, "POD_NAMESPACE": namespace}, secrets, map[string]string{
			"--addr":        net.JoinHostPort(probedIP, "50051"),
			"--health-addr": health,
		})
		if err != nil {
			return err
		}
		args := append(local.Args, "--kubeconfig="+kubeconfig) // in a pod: the in-cluster configuration
		if err := d.start(ctx, id, filepath.Join(d.opts.dir, "bin", "probed-kube"), args, nil); err != nil {
			return err
		}
	}
	return nil
}

// probedHosts are the DNS names of probed's certificate in the chart.
func probedHosts() []string {
	host := releaseName + "." + namespace + ".svc"
	return []string{releaseName, host, host + ".cluster.local", "*." + releaseName + "-headless." + namespace + ".svc"}
}

// start starts a process with its output in dir/name.log (and in also,
// when not nil).
func (d *demo) start(ctx context.Context, name, bin string, args []string, also io.Writer) error {
	log, err := os.Create(filepath.Join(d.opts.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if also != nil {
		cmd.Stderr = io.MultiWriter(log, also)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the demo
	c, err := procs.Start(cmd)
	if err != nil {
		_ = log.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	d.procs = append(d.procs, &process{name: name, child: c})
	d.onStop(func() { _ = log.Close() })
	logf(d.out, "started %s (pid %d): %s %s", name, c.Pid(), filepath.Base(bin), strings.Join(args, " "))
	_ = ctx
	return nil
}

// serviceAccountKubeconfig writes a kubeconfig of a token of the
// ServiceAccount sa.
func (d *demo) serviceAccountKubeconfig(ctx context.Context, sa, dir string) (string, error) {
	tr, err := d.admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(24 * 3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token of ServiceAccount %s: %w", sa, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: %s
  user: {token: %q}
contexts:
- name: demo
  context: {cluster: demo, user: %s}
current-context: demo
`, d.plane.URL, sa, tr.Status.Token, sa)
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// apply creates objs (server-side apply) in namespace when they are
// namespaced.
func (d *demo) apply(ctx context.Context, objs []*unstructured.Unstructured, ns string) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d.admin.Discovery()))
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = d.dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ri = d.dyn.Resource(m.Resource).Namespace(ns)
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "probed-kube-demo", Force: ptr(true)}); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// freePort returns a loopback address that was free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}
