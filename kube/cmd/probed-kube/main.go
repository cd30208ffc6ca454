// Command probed-kube is probed's readiness-gate controller for
// Kubernetes: it registers a probed target for each pod that lists the
// readiness gate probed.io/ready and holds its probes in the annotation
// probed.io/probes, and writes what probed says into the pod's condition
// probed.io/ready, which kubelet folds into the pod's Ready. Run
// `probed-kube --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/probed/probed/client"
	"github.com/probed/probed/kube/gate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
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
	healthAddr                                 string
	workers                                    int
	resync                                     time.Duration

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
	fs.StringVar(&o.addr, "addr", addr, "probed's gRPC address, or a comma-separated list of a cluster's replicas (env PROBED_ADDR)")
	fs.StringVar(&o.caFile, "ca", "", "PEM file of the CA certificates that verify probed's certificate (enables TLS)")
	fs.StringVar(&o.certFile, "cert", "", "PEM file of the client certificate, for mutual TLS (with --key)")
	fs.StringVar(&o.keyFile, "key", "", "PEM file of the client certificate's key")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding a bearer token sent with every call to probed")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; the in-cluster configuration when empty")
	fs.Float32Var(&o.qps, "kube-api-qps", 200, "requests per second to the Kubernetes API server")
	fs.IntVar(&o.burst, "kube-api-burst", 400, "burst of requests to the Kubernetes API server")
	fs.StringVar(&o.owner, "owner", "probed-kube", "name of the controller's set of targets in probed (one per cluster sharing a probed)")
	fs.StringVar(&o.namespace, "namespace", "", "watch the pods of this namespace only (all when empty)")
	fs.StringVar(&o.healthAddr, "health-addr", "0.0.0.0:8081", "address of /healthz, /readyz and /metrics (empty: off)")
	fs.IntVar(&o.workers, "workers", 8, "condition patches in flight (at most one per pod)")
	fs.DurationVar(&o.resync, "resync", 5*time.Minute, "apply the whole target set again this often even when no pod changed")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "run only while holding a Lease, so several replicas can run")
	fs.StringVar(&o.leaseNamespace, "lease-namespace", leaseNS, "namespace of the Lease (env POD_NAMESPACE)")
	fs.StringVar(&o.leaseName, "lease-name", "probed-kube", "name of the Lease")
	fs.StringVar(&o.identity, "identity", host, "this replica's name in the Lease (the host name)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "how long a dead leader keeps the Lease")
	fs.DurationVar(&o.renewDeadline, "renew-deadline", 10*time.Second, "how long the leader tries to renew before giving up")
	fs.DurationVar(&o.retryPeriod, "retry-period", 2*time.Second, "how often replicas try to acquire or renew the Lease")
	return fs, o
}

// run runs probed-kube with args and returns its exit status.
func run(ctx context.Context, args []string, errOut io.Writer) int {
	fs, o := flags(errOut)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(errOut, "probed-kube: %v\nRun 'probed-kube --help' for usage.\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(errOut, "probed-kube: unexpected arguments %v\n", fs.Args())
		return 2
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(errOut, nil)))
	if err := serve(ctx, o); err != nil {
		fmt.Fprintf(errOut, "probed-kube: %v\n", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, o *options) error {
	cfg, err := kubeConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.UserAgent = "probed-kube"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var copts []client.Option
	if o.caFile != "" {
		copts = append(copts, client.WithTLS(o.caFile))
	}
	if o.certFile != "" || o.keyFile != "" {
		copts = append(copts, client.WithClientCert(o.certFile, o.keyFile))
	}
	if o.tokenFile != "" {
		copts = append(copts, client.WithTokenFile(o.tokenFile))
	}
	pc, err := client.Dial(ctx, o.addr, copts...)
	if err != nil {
		return err
	}
	defer func() { _ = pc.Close() }()

	reg := prometheus.NewRegistry()
	metrics := gate.NewMetrics(reg)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.healthAddr != "" {
		lis, err := net.Listen("tcp", o.healthAddr)
		if err != nil {
			return fmt.Errorf("health: %w", err)
		}
		srv := &http.Server{Handler: healthHandler(reg, metrics), ReadHeaderTimeout: 5 * time.Second}
		wg.Go(func() { _ = srv.Serve(lis) })
		wg.Go(func() {
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			_ = srv.Shutdown(sctx)
		})
	}
	controller := func(ctx context.Context) error {
		return gate.New(kube, gate.NewProber(pc), gate.Options{
			Owner: o.owner, Namespace: o.namespace, Resync: o.resync, Workers: o.workers, Metrics: metrics,
		}).Run(ctx)
	}
	if !o.leaderElect {
		metrics.SetLeader(true)
		return controller(ctx)
	}
	return gate.RunElected(ctx, kube, gate.Election{
		Namespace: o.leaseNamespace, Name: o.leaseName, Identity: o.identity,
		LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod,
		OnLeading: func(leading bool) {
			metrics.SetLeader(leading)
			slog.Info("leader election", "identity", o.identity, "leading", leading)
		},
	}, controller)
}

func kubeConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	return clientcmd.BuildConfigFromFlags("", path)
}

// healthHandler serves /healthz (the process runs), /readyz (probed's
// watch is connected, or this replica is not leading) and /metrics.
func healthHandler(reg *prometheus.Registry, m *gate.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, since, err := m.Connected()
		if !m.Leading() || ok {
			_, _ = io.WriteString(w, "ok\n")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		msg := "probed unreachable"
		if !since.IsZero() {
			msg += " since " + since.UTC().Format(time.RFC3339)
		}
		if err != nil {
			msg += ": " + strings.TrimSpace(err.Error())
		}
		_, _ = io.WriteString(w, msg+" (pods keep their last conditions)\n")
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}
