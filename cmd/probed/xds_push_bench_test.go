package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/xds"
)

// ackingADS opens a State of the World ADS stream to addr subscribed to
// the assignment of service, acknowledging every response, until the
// test ends; it counts the responses.
func ackingADS(t *testing.T, addr, service string, got *sync.WaitGroup, n *int64, mu *sync.Mutex) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req := &discovery.DiscoveryRequest{Node: &corev3.Node{Id: "bench"}, TypeUrl: xds.EndpointType, ResourceNames: []string{service}}
	if err := stream.Send(req); err != nil {
		cancel()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got.Add(1)
	wg.Go(func() {
		first := true
		for {
			resp, err := stream.Recv()
			if err != nil {
				if first {
					got.Done()
				}
				return
			}
			mu.Lock()
			*n++
			mu.Unlock()
			if first {
				got.Done()
				first = false
			}
			ack := &discovery.DiscoveryRequest{TypeUrl: xds.EndpointType, ResourceNames: []string{service}, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
			if err := stream.Send(ack); err != nil {
				return
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = conn.Close()
	})
}

// TestXDSPushCost measures what a flip costs in a service of 1,000
// endpoints (PROBED_XDS_BENCH_ENDPOINTS): probed's CPU and the bytes of
// each assignment it pushes. 995 targets are probed every 10 s, 5 every
// 100 ms, each its own endpoint (serving port); one of the 5 flips every
// 200 ms (5 flips a second, each a push of the whole assignment to every
// stream). Subscribed: a real grpc-go channel (xds:///svc-0.ns, which
// must hold every assignment, none rejected), then that and 100 raw ADS
// streams more that acknowledge every push. For each, a window without
// flips and one with (PROBED_XDS_BENCH_WINDOW, 30 s): the CPU per flip is
// the difference over the flips, per push that over the pushes.
func TestXDSPushCost(t *testing.T) {
	if os.Getenv(xdsBenchEnv) == "" {
		t.Skipf("a benchmark: set %s=1 (BENCHMARKS.md)", xdsBenchEnv)
	}
	endpoints := benchInt("PROBED_XDS_BENCH_ENDPOINTS", 1000)
	window := time.Duration(benchInt("PROBED_XDS_BENCH_WINDOW", 30)) * time.Second
	const (
		flippers = 5
		rawExtra = 100
	)
	bin := buildProbed(t)
	p := startXDSProbed(t, bin, t.TempDir(), "--log-level", "warn", "--max-targets", strconv.Itoa(endpoints+100))
	backend := startProbeLog(t, endpoints)
	c := dialProbedClient(t, p.addr())
	set := client.TargetSet{Owner: "bench"}
	for i := range endpoints {
		secs, ms := int32(10), int32(0)
		if i < flippers {
			secs, ms = 1, -900
		}
		set.Targets = append(set.Targets, &probev1.Target{
			Name:   fmt.Sprintf("ns/t-%d", i),
			Labels: map[string]string{"probed.io/service": "svc-0", "probed.io/serving-port": strconv.Itoa(20000 + i)},
			ReadinessProbe: &probev1.Probe{
				Handler:            &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: backend.port, Path: "/t/" + strconv.Itoa(i)}},
				PeriodSeconds:      secs,
				PeriodMilliseconds: &ms,
				TimeoutSeconds:     1,
				SuccessThreshold:   1,
				FailureThreshold:   1,
			},
		})
	}
	ctx := t.Context()
	if _, err := c.ApplyTargets(ctx, set); err != nil {
		t.Fatal(err)
	}
	poll.UntilMet(t, "every target ready", 2*time.Minute, func() string {
		if n := sumMetric(metricsText(t, p.metrics), "probed_xds_endpoints"); n != float64(endpoints) {
			return fmt.Sprintf("%v endpoints", n)
		}
		return ""
	})
	cons := startXDSConsumers(t, p.xdsAddr, 1)

	// window measures probed's CPU, its EDS pushes and their bytes over a
	// window, flipping or not.
	type result struct {
		cpu           time.Duration
		flips         int
		pushes, bytes float64
	}
	// The push metrics are labelled by the type's short name (telemetry.XDSStats).
	eds := `type="` + xds.TypeName(xds.EndpointType) + `"`
	measure := func(flip bool) result {
		text0 := metricsText(t, p.metrics)
		cpu0 := processCPU(t, p.pid())
		end := time.Now().Add(window)
		flips := 0
		if flip {
			tick := time.NewTicker(200 * time.Millisecond)
			for time.Now().Before(end) {
				<-tick.C
				i := flips % flippers
				backend.down[i].Store(!backend.down[i].Load())
				flips++
			}
			tick.Stop()
		} else {
			time.Sleep(window) // the measured window
		}
		cpu := processCPU(t, p.pid()) - cpu0
		text1 := metricsText(t, p.metrics)
		return result{
			cpu:    cpu,
			flips:  flips,
			pushes: labelledMetric(text1, "probed_xds_pushes_total", eds) - labelledMetric(text0, "probed_xds_pushes_total", eds),
			bytes:  labelledMetric(text1, "probed_xds_push_bytes_total", eds) - labelledMetric(text0, "probed_xds_push_bytes_total", eds),
		}
	}
	run := func(streams int) {
		quiet := measure(false)
		flipping := measure(true)
		extra := flipping.cpu - quiet.cpu
		if flipping.flips > 0 && flipping.pushes == 0 {
			t.Errorf("%d stream(s): %d flips and no EDS push counted (%s)", streams, flipping.flips, eds)
		}
		t.Logf("%d stream(s): CPU %v without flips, %v with %d flips (%.0f EDS pushes, %.0f bytes each): %v per flip, %v per push",
			streams, quiet.cpu.Round(time.Millisecond), flipping.cpu.Round(time.Millisecond), flipping.flips, flipping.pushes,
			flipping.bytes/max(flipping.pushes, 1), (extra / time.Duration(max(flipping.flips, 1))).Round(time.Microsecond),
			(extra / time.Duration(max(int(flipping.pushes), 1))).Round(time.Microsecond))
		// Every target back up, for the next run.
		for i := range flippers {
			backend.down[i].Store(false)
		}
	}
	run(1)
	var got sync.WaitGroup
	var mu sync.Mutex
	var responses int64
	for range rawExtra {
		ackingADS(t, p.xdsAddr, "svc-0.ns", &got, &responses, &mu)
	}
	got.Wait()
	run(1 + rawExtra)
	if n := cons.nacked.Load(); n != 0 {
		t.Errorf("the grpc-go client holds %d rejected resources", n)
	}
}
