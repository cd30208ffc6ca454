package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/kube/gate"
	"github.com/probed/probed/kube/internal/kubelet"
	"github.com/probed/probed/kube/internal/kubetest"
	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestMain(m *testing.M) {
	os.Exit(kubetest.Main(m, kubetest.WithLeakCheck(
		// The shared control plane's clientset keeps its connections.
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*clientConnReadLoop).run"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		// klog's flush daemon runs for the process.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)))
}

// fixture is one test's world: a namespace and a Node of their own on the
// shared control plane, a kubelet stand-in, a real probed, and a pod
// network server answering on every pod IP.
type fixture struct {
	t       *testing.T
	env     *kubetest.Env
	kube    *kubernetes.Clientset
	ns      string
	kubelet *kubelet.Kubelet
	probed  *probedtest.Server
	pc      *client.Client
	net     *podNetwork
}

var nextIP atomic.Int64 // pod IPs are unique across the binary's tests

func setup(t *testing.T) *fixture {
	t.Helper()
	env := kubetest.Get(t)
	ctx := t.Context()
	ns := env.Namespace(t, t.Name(), nil)
	kl, err := kubelet.Start(ctx, env.Admin, "node-"+ns)
	if err != nil {
		t.Fatalf("kubelet: %v", err)
	}
	t.Cleanup(kl.Stop)
	f := &fixture{t: t, env: env, kube: env.Admin, ns: ns, kubelet: kl, net: newPodNetwork(t)}
	f.startProbed(probedtest.Options{})
	return f
}

// startProbed starts (or restarts, with opts.Addr and opts.Store of the
// last one) the test's probed.
func (f *fixture) startProbed(opts probedtest.Options) {
	if opts.Engine.MinPeriod == 0 {
		opts.Engine.MinPeriod = 10 * time.Millisecond // the 50 ms periods of httpProbes
	}
	f.probed = probedtest.Start(f.t, opts)
	if f.pc == nil {
		c, err := client.Dial(f.t.Context(), f.probed.Addr)
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(func() { _ = c.Close() })
		f.pc = c
	}
}

// startController runs a controller of the test's namespace until the
// returned stop is called (or the test ends).
func (f *fixture) startController(opts gate.Options) (stop func() error) {
	f.t.Helper()
	if opts.Scope.Namespace == "" && opts.Scope.NamespaceSelector == nil && opts.Pods == nil {
		opts.Scope.Namespace = f.ns
	}
	if opts.Owner == "" {
		opts.Owner = "ctl-" + f.ns
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gate.New(f.kube, gate.NewProber(f.pc), opts).Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	f.t.Cleanup(func() { _ = stop() })
	return stop
}

// pod creates an opted-in pod (gate and annotation; annotation "" leaves
// the annotation out) bound to the test's Node, and runs it with a new
// pod IP. Its container port "http" is the pod network's port.
func (f *fixture) pod(name, annotation string, gated bool) (*corev1.Pod, string) {
	f.t.Helper()
	return f.podIn(f.ns, name, annotation, gated)
}

// podIn is pod in namespace ns.
func (f *fixture) podIn(ns, name, annotation string, gated bool) (*corev1.Pod, string) {
	f.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName: f.kubelet.Node(),
			Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: f.net.port}, {Name: "tcp", ContainerPort: f.net.tcpPort}}}},
		},
	}
	if gated {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: podtarget.GateType}}
	}
	if annotation != "" {
		p.Annotations = map[string]string{podtarget.ProbesAnnotation: annotation}
	}
	created, err := f.kube.CoreV1().Pods(ns).Create(f.t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("create pod: %v", err)
	}
	ip := kubetest.PodIP(int(nextIP.Add(1)))
	running, err := f.kubelet.Run(f.t.Context(), created, ip)
	if err != nil {
		f.t.Fatalf("run pod: %v", err)
	}
	return running, ip
}

// namespace creates another namespace of the test, named after it with
// suffix, with labels.
func (f *fixture) namespace(suffix string, labels map[string]string) string {
	f.t.Helper()
	name := f.ns + "-" + suffix
	if _, err := f.kube.CoreV1().Namespaces().Create(f.t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("create namespace: %v", err)
	}
	return name
}

// httpProbes is an annotation whose readiness probe GETs /healthz on the
// named port every 50 ms.
const httpProbes = `{"readinessProbe": {"httpGet": {"port": "http", "path": "/healthz"}, "periodSeconds": 1, "periodMilliseconds": -950, "failureThreshold": 1}}`

// condition waits until the pod's probed.io/ready condition satisfies ok
// and returns it.
func (f *fixture) condition(name string, what string, ok func(*corev1.PodCondition) bool) *corev1.PodCondition {
	f.t.Helper()
	return f.conditionIn(f.ns, name, what, ok)
}

// conditionIn is condition in namespace ns.
func (f *fixture) conditionIn(ns, name string, what string, ok func(*corev1.PodCondition) bool) *corev1.PodCondition {
	f.t.Helper()
	var last *corev1.PodCondition
	poll.UntilMet(f.t, "pod "+name+" condition "+what, 30*time.Second, func() string {
		pod, err := f.kube.CoreV1().Pods(ns).Get(f.t.Context(), name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			f.t.Fatalf("get pod: %v", err)
		}
		last = nil
		if pod != nil {
			for i := range pod.Status.Conditions {
				if pod.Status.Conditions[i].Type == podtarget.GateType {
					last = &pod.Status.Conditions[i]
				}
			}
		}
		if ok(last) {
			return ""
		}
		return fmt.Sprintf("pod %s: condition %s not reached within 30 s; last: %+v", name, what, last)
	})
	return last
}

func is(status corev1.ConditionStatus, reason string) func(*corev1.PodCondition) bool {
	return func(c *corev1.PodCondition) bool { return c != nil && c.Status == status && c.Reason == reason }
}

// podReady waits until the pod's Ready condition is want.
func (f *fixture) podReady(name string, want corev1.ConditionStatus) {
	f.t.Helper()
	poll.UntilMet(f.t, "pod "+name+" Ready "+string(want), 30*time.Second, func() string {
		pod, err := f.kube.CoreV1().Pods(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == want {
				return ""
			}
		}
		return fmt.Sprintf("pod %s: Ready not %s within 30 s", name, want)
	})
}

// service creates a Service selecting app=web.
func (f *fixture) service() {
	f.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if _, err := f.kube.CoreV1().Services(f.ns).Create(f.t.Context(), svc, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("create service: %v", err)
	}
}

// endpointReady waits until the Service's EndpointSlices list ip with
// ready == want.
func (f *fixture) endpointReady(ip string, want bool) {
	f.t.Helper()
	poll.UntilMet(f.t, "EndpointSlice endpoint "+ip+" ready "+strconv.FormatBool(want), 30*time.Second, func() string {
		if endpointIs(f.t, f.kube, f.ns, ip, want) {
			return ""
		}
		return fmt.Sprintf("EndpointSlice endpoint %s: ready not %v within 30 s", ip, want)
	})
}

func endpointIs(t testing.TB, kube kubernetes.Interface, ns, ip string, want bool) bool {
	slices, err := kube.DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) > 0 && ep.Addresses[0] == ip {
				ready := ep.Conditions.Ready != nil && *ep.Conditions.Ready
				return ready == want
			}
		}
	}
	return false
}

// podNetwork is one HTTP server listening on every address of the
// namespace (so on every pod IP), whose /healthz answers per pod IP: 200
// when that pod is healthy, 503 otherwise; and, on tcpPort, a listener
// that accepts and closes (what a tcpSocket probe needs: the handshake).
type podNetwork struct {
	port int32
	// tcpPort is served by one goroutine that accepts and closes, no
	// goroutine per connection: the test process, which also hosts
	// probed, serves 10,000 pods' tcpSocket probes at once in the scale
	// tests, where a cluster spreads them over as many pods.
	tcpPort int32
	mu      sync.Mutex
	// healthy by pod IP; guarded by mu
	healthy map[string]bool
	// since is when each pod IP last turned healthy; guarded by mu
	since map[string]time.Time
}

func newPodNetwork(t testing.TB) *podNetwork {
	lis, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &podNetwork{port: int32(lis.Addr().(*net.TCPAddr).Port), healthy: map[string]bool{}, since: map[string]time.Time{}}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		host, _, _ := net.SplitHostPort(fmt.Sprint(local))
		if r.URL.Path == "/secret" {
			// What a probe must never carry into a condition or an Event.
			_, _ = io.WriteString(w, secretBody+host)
			return
		}
		n.mu.Lock()
		ok := n.healthy[host]
		n.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "not yet "+host)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})}
	tcp, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	n.tcpPort = int32(tcp.Addr().(*net.TCPAddr).Port)
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(lis) })
	wg.Go(func() {
		for {
			c, err := tcp.Accept()
			switch {
			case errors.Is(err, net.ErrClosed):
				return
			case err != nil:
				// Out of file descriptors, say: try again, as
				// http.Server does, rather than stop serving.
				time.Sleep(5 * time.Millisecond)
				continue
			}
			_ = c.Close()
		}
	})
	t.Cleanup(func() {
		_ = srv.Close()
		_ = tcp.Close()
		wg.Wait()
	})
	return n
}

// secretBody starts what /secret answers.
const secretBody = "SECRET-ANSWER-"

// set makes the pod at ip healthy or not.
func (n *podNetwork) set(ip string, healthy bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if healthy && !n.healthy[ip] {
		n.since[ip] = time.Now()
	}
	n.healthy[ip] = healthy
}

func (n *podNetwork) healthySince(ip string) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.since[ip]
}

// nextPodIP returns an unused pod IP.
func nextPodIP() string { return kubetest.PodIP(int(nextIP.Add(1))) }

// annotate replaces the pod's probes annotation.
func (f *fixture) annotate(name, annotation string) {
	f.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{podtarget.ProbesAnnotation: annotation}}})
	if _, err := f.kube.CoreV1().Pods(f.ns).Patch(f.t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatalf("annotate: %v", err)
	}
}

// event waits for an Event on the pod with reason whose message contains
// text.
func (f *fixture) event(pod, reason, text string) {
	f.t.Helper()
	f.eventIn(f.ns, pod, reason, text)
}

// eventIn is event in namespace ns.
func (f *fixture) eventIn(ns, pod, reason, text string) {
	f.t.Helper()
	poll.UntilMet(f.t, "Event "+reason+" on pod "+pod, 30*time.Second, func() string {
		evs, err := f.kube.CoreV1().Events(ns).List(f.t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, ev := range evs.Items {
			if ev.Reason == reason && strings.Contains(ev.Message, text) {
				return ""
			}
		}
		return fmt.Sprintf("no Event %s mentioning %q on pod %s within 30 s", reason, text, pod)
	})
}

// waitTarget waits until probed's target name satisfies ok.
func (f *fixture) waitTarget(name string, ok func(*probev1.Target) bool) {
	f.t.Helper()
	poll.Until(f.t, "target "+name+" as wanted", 30*time.Second, func() bool {
		tg, err := f.pc.Get(f.t.Context(), name)
		return err == nil && ok(tg)
	})
}

// waitGone waits until probed has no target name.
func (f *fixture) waitGone(name string) {
	f.t.Helper()
	poll.Until(f.t, "target "+name+" gone", 30*time.Second, func() bool {
		_, err := f.pc.Get(f.t.Context(), name)
		return errors.Is(err, client.ErrNotFound)
	})
}

// clientAs returns a clientset of the API server as user.
func (f *fixture) clientAs(t *testing.T, user string) *kubernetes.Clientset {
	cs, err := kubernetes.NewForConfig(f.env.Plane.Config(user))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// quiesce waits until the controller whose metrics are in reg has handled
// every pod key queued so far: its workqueue is empty and has finished as
// many keys as were added (workqueue metrics). It is the barrier before
// asserting that something did not happen: what the controller does, it
// does from a key of that queue. (Keys put off with a delay, a damped
// write or an expectation's recheck, are not in the queue until their
// time comes.)
func quiesce(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	poll.UntilMet(t, "the controller's queue drained", 30*time.Second, func() string {
		depth, adds, done := queueFigures(t, reg)
		if depth == 0 && done >= adds && adds > 0 {
			return ""
		}
		return fmt.Sprintf("workqueue depth %v, %v keys added, %v done", depth, adds, done)
	})
}

// queueFigures reads the workqueue's depth, adds and finished keys.
func queueFigures(t *testing.T, reg *prometheus.Registry) (depth, adds, done float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "workqueue_depth":
				depth += m.GetGauge().GetValue()
			case "workqueue_adds_total":
				adds += m.GetCounter().GetValue()
			case "workqueue_work_duration_seconds":
				done += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return depth, adds, done
}
