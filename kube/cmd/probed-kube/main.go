// Command probed-kube is probed's readiness-gate controller for
// Kubernetes: it registers a probed target for each pod that lists the
// readiness gate probed.io/ready and holds its probes in the annotation
// probed.io/probes, and writes what probed says into the pod's condition
// probed.io/ready, which kubelet folds into the pod's Ready. It also serves
// the admission webhook that adds the gate to new pods (--webhook-addr).
// Run `probed-kube --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/probed/probed/internal/buildinfo"
	"github.com/probed/probed/kube/gate"
)

// version is set by the build: -ldflags "-X main.version=...".
var version string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command line's.
type options struct {
	addr, caFile, certFile, keyFile, tokenFile string
	kubeconfig                                 string
	qps                                        float32
	burst                                      int
	owner, namespace                           string
	namespaceSelector, podSelector             string
	healthAddr                                 string
	workers                                    int
	resync, minInterval                        time.Duration
	logLevel, logFormat                        string
	showVersion                                bool

	webhookAddr, webhookCertFile, webhookKeyFile string

	leaderElect                               bool
	leaseNamespace, leaseName, identity       string
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

func flags(errOut io.Writer) (*pflag.FlagSet, *options) {
	o := &options{}
	fs := pflag.NewFlagSet("probed-kube", pflag.ContinueOnError)
	fs.SetOutput(errOut)
	addr := os.Getenv("PROBED_ADDR")
	if addr == "" {
		addr = "127.0.0.1:50051"
	}
	host, _ := os.Hostname()
	leaseNS := os.Getenv("POD_NAMESPACE")
	if leaseNS == "" {
		leaseNS = "default"
	}
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	fs.StringVar(&o.addr, "addr", addr, "probed's gRPC address, or a comma-separated list of a cluster's replicas (env PROBED_ADDR)")
	fs.StringVar(&o.caFile, "ca", "", "PEM file of the CA certificates that verify probed's certificate (enables TLS)")
	fs.StringVar(&o.certFile, "cert", "", "PEM file of the client certificate, for mutual TLS (with --key)")
	fs.StringVar(&o.keyFile, "key", "", "PEM file of the client certificate's key")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding a bearer token sent with every call to probed")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; the in-cluster configuration when empty")
	fs.Float32Var(&o.qps, "kube-api-qps", 200, "requests per second to the Kubernetes API server (condition patches, Events, the Lease), client-side")
	fs.IntVar(&o.burst, "kube-api-burst", 400, "burst of requests to the Kubernetes API server, client-side")
	fs.StringVar(&o.owner, "owner", gate.DefaultOwner, "name of the controller's targets in probed (one per cluster sharing a probed)")
	fs.StringVar(&o.namespace, "namespace", "", "watch the pods of this namespace only (all when empty)")
	fs.StringVar(&o.namespaceSelector, "namespace-selector", "", "watch the pods of the namespaces whose labels match this label selector only (e.g. 'team in (a,b)'; needs list/watch on namespaces)")
	fs.StringVar(&o.podSelector, "pod-selector", "", "watch the pods whose labels match this label selector only (filtered by the API server)")
	fs.StringVar(&o.healthAddr, "health-addr", "0.0.0.0:8081", "address of /healthz, /readyz and /metrics (empty: off)")
	fs.IntVar(&o.workers, "workers", gate.DefaultWorkers, "condition patches in flight (at most one per pod)")
	fs.DurationVar(&o.resync, "resync", gate.DefaultResync, "apply every namespace's targets again this often even when no pod changed")
	fs.DurationVar(&o.minInterval, "condition-min-interval", gate.DefaultMinInterval, "least time between two writes of one pod's condition: a flip after a quiet interval is written at once, a pod flipping faster at most once per interval with its latest state")
	fs.StringVar(&o.logLevel, "log-level", "info", "least level logged: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json (client-go's own logs included)")
	fs.StringVar(&o.webhookAddr, "webhook-addr", "", "address of the admission webhook that adds the readiness gate (path "+webhookPath+", HTTPS; empty: off); every replica serves it")
	fs.StringVar(&o.webhookCertFile, "webhook-cert-file", "", "PEM certificate of the webhook, read again when it changes")
	fs.StringVar(&o.webhookKeyFile, "webhook-key-file", "", "PEM key of the webhook's certificate, read again when it changes")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "run only while holding a Lease, so several replicas can run")
	fs.StringVar(&o.leaseNamespace, "lease-namespace", leaseNS, "namespace of the Lease (env POD_NAMESPACE)")
	fs.StringVar(&o.leaseName, "lease-name", "probed-kube", "name of the Lease")
	fs.StringVar(&o.identity, "identity", host, "this replica's name in the Lease (the host name)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "how long a dead leader keeps the Lease")
	fs.DurationVar(&o.renewDeadline, "renew-deadline", 10*time.Second, "how long the leader tries to renew before giving up")
	fs.DurationVar(&o.retryPeriod, "retry-period", 2*time.Second, "how often replicas try to acquire or renew the Lease")
	return fs, o
}

// versionLine is what --version prints.
func versionLine() string {
	return "probed-kube " + buildinfo.Version(version) + " " + buildinfo.GoVersion()
}

// run runs probed-kube with args and returns its exit status.
func run(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs, o := flags(errOut)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(errOut, "probed-kube: %v\nRun 'probed-kube --help' for usage.\n", err)
		return 2
	}
	if o.showVersion {
		fmt.Fprintln(out, versionLine())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(errOut, "probed-kube: unexpected arguments %v\n", fs.Args())
		return 2
	}
	scope, err := o.scope()
	if err != nil {
		fmt.Fprintf(errOut, "probed-kube: %v\n", err)
		return 2
	}
	log, err := newLogger(errOut, o.logLevel, o.logFormat)
	if err != nil {
		fmt.Fprintf(errOut, "probed-kube: %v\n", err)
		return 2
	}
	slog.SetDefault(log)
	// client-go logs through klog: into the same logger, in one format.
	routeKlog(log)
	log.Info("probed-kube starting", "version", buildinfo.Version(version), "identity", o.identity)
	if err := serve(ctx, o, scope, log); err != nil {
		log.Error("probed-kube stopped", "err", err)
		fmt.Fprintf(errOut, "probed-kube: %v\n", err)
		return 1
	}
	return 0
}

// scope reads --namespace, --namespace-selector and --pod-selector.
func (o *options) scope() (gate.Scope, error) {
	s := gate.Scope{Namespace: o.namespace}
	if o.namespaceSelector != "" {
		sel, err := labels.Parse(o.namespaceSelector)
		if err != nil {
			return s, fmt.Errorf("--namespace-selector: %w", err)
		}
		s.NamespaceSelector = sel
	}
	if o.podSelector != "" {
		sel, err := labels.Parse(o.podSelector)
		if err != nil {
			return s, fmt.Errorf("--pod-selector: %w", err)
		}
		s.PodSelector = sel
	}
	return s, nil
}

// newLogger returns the process's logger: text or JSON on w, from level.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
