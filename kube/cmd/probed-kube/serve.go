package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/probed/probed/client"
	"github.com/probed/probed/kube/gate"
	"github.com/probed/probed/kube/inject"
)

// webhookPath is the admission webhook's path.
const webhookPath = inject.Path

// reconnect is how the connection to probed is redialled once lost: at
// most every 250 ms (client.Dial's default waits up to 5 s between
// attempts, which is how long the controller took to notice a restarted
// probed). A refused connection costs nothing, and the watch's own
// backoff is as short (gate's watch), so the controller resumes within
// about half a second of probed listening again.
var reconnect = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  50 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   250 * time.Millisecond,
	},
	MinConnectTimeout: 5 * time.Second,
}

// serve runs the process: the pod cache and the webhook on every replica,
// the controller while this replica leads.
func serve(ctx context.Context, o *options, scope gate.Scope, log *slog.Logger) error {
	cfg, err := kubeConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	// One client for everything (condition patches, Events, the Lease,
	// the informers' lists): its rate limiter is --kube-api-qps/-burst.
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.UserAgent = "probed-kube/" + version
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gate.RegisterClientMetrics(reg)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	copts := []client.Option{client.WithDialOptions(grpc.WithConnectParams(reconnect))}
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

	metrics := gate.NewMetrics(reg)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	if o.healthAddr != "" {
		lis, err := net.Listen("tcp", o.healthAddr)
		if err != nil {
			return fmt.Errorf("health: %w", err)
		}
		srv := &http.Server{Handler: healthHandler(reg, metrics), ReadHeaderTimeout: 5 * time.Second}
		wg.Go(func() { _ = srv.Serve(lis) })
		wg.Go(func() {
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer scancel()
			_ = srv.Shutdown(sctx)
		})
	}
	if o.webhookAddr != "" {
		if o.webhookCertFile == "" || o.webhookKeyFile == "" {
			return errors.New("--webhook-addr needs --webhook-cert-file and --webhook-key-file")
		}
		cert, err := inject.NewCertificate(o.webhookCertFile, o.webhookKeyFile, log)
		if err != nil {
			return err
		}
		lis, err := net.Listen("tcp", o.webhookAddr)
		if err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
		log.Info("admission webhook listening", "addr", lis.Addr().String(), "path", webhookPath)
		wg.Go(func() {
			if err := inject.Serve(ctx, lis, cert, log); err != nil {
				errs <- fmt.Errorf("webhook: %w", err)
			}
		})
	}

	// The pod cache starts and syncs on every replica, before the
	// election: a replica that takes over does not LIST every pod first.
	pods, err := gate.NewPods(kube, scope)
	if err != nil {
		return err
	}
	podsCtx, stopPods := context.WithCancel(ctx)
	defer func() { stopPods(); pods.Shutdown() }()
	if err := pods.Start(podsCtx); err != nil {
		return err
	}
	metrics.SetCacheSynced(true)
	controller := func(ctx context.Context) error {
		return gate.New(kube, gate.NewProber(pc), gate.Options{
			Owner: o.owner, Pods: pods, Resync: o.resync, Workers: o.workers,
			MinInterval: o.minInterval, Metrics: metrics,
		}).Run(ctx)
	}
	done := make(chan error, 1)
	wg.Go(func() {
		if !o.leaderElect {
			metrics.SetLeader(true)
			done <- controller(ctx)
			return
		}
		done <- gate.RunElected(ctx, kube, gate.Election{
			Namespace: o.leaseNamespace, Name: o.leaseName, Identity: o.identity,
			LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod,
			OnLeading: func(leading bool) {
				metrics.SetLeader(leading)
				log.Info("leader election", "identity", o.identity, "leading", leading)
			},
		}, controller)
	})
	select {
	case err := <-done:
		return err
	case err := <-errs:
		cancel()
		// The controller's end after the cancel: the server's error
		// says why the process stops.
		if derr := <-done; derr != nil && !errors.Is(derr, context.Canceled) {
			log.Warn("controller stopped", "err", derr)
		}
		return err
	}
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

// healthHandler serves /healthz (the process runs), /readyz (the pod cache
// is synced, and probed's watch is connected or this replica is not
// leading) and /metrics.
func healthHandler(reg *prometheus.Registry, m *gate.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.CacheSynced() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "the pod cache is not synced yet\n")
			return
		}
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
