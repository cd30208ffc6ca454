package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestApplyFloodMemory measures what ApplyTargets streams that never end
// make a real probed hold (issue 30: "an identity the policy grants
// nothing pinned +700 MB with 4 streams"). It runs only with
// PROBED_APPLY_FLOOD set to the number of streams of each identity
// (PROBED_APPLY_FLOOD=4), for PROBED_APPLY_FLOOD_TIME (20s) per identity;
// PROBED_BIN runs that probed binary instead of this package's (the
// baseline: build it from the commit before the fix). For each of
// "nobody" (granted nothing: garbage targets, up to --max-request-bytes a
// message) and "writer" (granted write on flood/: valid targets as large
// as validation allows) it reports the server's resident memory before,
// its peak (VmHWM) and how the streams ended. SECURITY.md, "ApplyTargets
// bounds", has the figures and the command.
func TestApplyFloodMemory(t *testing.T) {
	streams, _ := strconv.Atoi(os.Getenv("PROBED_APPLY_FLOOD"))
	if streams <= 0 {
		t.Skip("set PROBED_APPLY_FLOOD=<streams per identity> to measure (SECURITY.md, ApplyTargets bounds)")
	}
	length := 20 * time.Second
	if d, err := time.ParseDuration(os.Getenv("PROBED_APPLY_FLOOD_TIME")); err == nil {
		length = d
	}
	limit := 200 << 20
	if n, err := strconv.Atoi(os.Getenv("PROBED_APPLY_FLOOD_MIB")); err == nil {
		limit = n << 20
	}
	bin := os.Getenv("PROBED_BIN")
	if bin == "" {
		bin = buildProbed(t)
	}
	dir := t.TempDir()
	tokens, policy := filepath.Join(dir, "tokens"), filepath.Join(dir, "policy.yaml")
	writeFile(t, tokens, "tok-nobody-0123456789abcdef nobody\ntok-writer-0123456789abcdef writer\n")
	writeFile(t, policy, "rules:\n  - {identities: [writer], names: [flood/], verbs: [read, write]}\n")
	args := []string{"--addr", refused.Reserve(t).Addr(), "--data-dir", filepath.Join(dir, "data"), "--metrics-addr=",
		"--auth-token-file", tokens, "--authz-policy", policy, "--registrations-per-second=0"}
	p := &crashProcess{t: t, bin: bin, args: args}
	defer p.kill()
	if _, err := p.start(); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(p.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	c := probev1.NewProbeServiceClient(conn)
	pid := p.pid()
	t.Logf("probed %s, %d streams per identity, %v each", bin, streams, length)
	t.Logf("resident at start: %s", memory(t, pid))

	for _, who := range []struct{ identity, message string }{
		{"nobody", "garbage"},
		{"writer", "valid"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), length)
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-"+who.identity+"-0123456789abcdef")
		var sending, wg sync.WaitGroup
		ends := make([]string, streams)
		for i := range streams {
			sending.Add(1)
			wg.Go(func() {
				ends[i] = flood(ctx, c, fmt.Sprintf("%s-%d", who.identity, i), who.message == "valid", limit, sending.Done)
			})
		}
		sending.Wait() // every stream sent its limit, or ended
		t.Logf("%s (%s targets): resident with the streams open: %s", who.identity, who.message, memory(t, pid))
		cancel()
		wg.Wait()
		t.Logf("%s: streams: %s", who.identity, strings.Join(ends, "; "))
	}
}

// flood streams one set of owner that never ends until ctx is done:
// messages of about 1 MiB, of valid targets under flood/ or of garbage
// ones (a 1 MiB label), limit bytes at most, then nothing. It calls sent
// once it sent them or the stream ended, and returns how the stream
// ended and how much it sent.
func flood(ctx context.Context, c probev1.ProbeServiceClient, owner string, valid bool, limit int, done func()) string {
	var once sync.Once
	defer once.Do(done)
	stream, err := c.ApplyTargets(ctx)
	if err != nil {
		return err.Error()
	}
	sent, n := 0, 0
	msg := &probev1.ApplyTargetsRequest{Owner: owner}
	for {
		msg.Targets = msg.Targets[:0]
		if valid {
			labels := map[string]string{}
			for i := range 64 {
				labels[fmt.Sprintf("label-%02d-%s", i, strings.Repeat("k", 40))] = strings.Repeat("v", 63)
			}
			for range 100 {
				msg.Targets = append(msg.Targets, &probev1.Target{Name: fmt.Sprintf("flood/%s-%d", owner, n), Labels: labels})
				n++
			}
		} else {
			msg.Targets = append(msg.Targets, &probev1.Target{Name: fmt.Sprintf("x%d", n), Labels: map[string]string{"g": strings.Repeat("g", 1000<<10)}})
			n++
		}
		if err := stream.Send(msg); err != nil {
			if errors.Is(err, io.EOF) {
				err = stream.RecvMsg(new(probev1.ApplyTargetsResponse))
			}
			return fmt.Sprintf("%v after %d MiB (%s)", status.Code(err), sent>>20, status.Convert(err).Message())
		}
		sent += proto.Size(msg)
		msg.Owner = ""
		if sent >= limit {
			once.Do(done)
			err := stream.RecvMsg(new(probev1.ApplyTargetsResponse)) // the end of ctx, or the server's
			return fmt.Sprintf("%v after %d MiB, all sent (%s)", status.Code(err), sent>>20, status.Convert(err).Message())
		}
	}
}

// memory is the resident set of process pid now and at its peak.
func memory(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var rss, hwm string
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "VmRSS":
			rss = strings.TrimSpace(v)
		case "VmHWM":
			hwm = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("%s (peak %s)", rss, hwm)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestApplyDryRunCPU measures the CPU a real probed spends on a dry run
// of a 20,000-target set (issue 30: "~124 ms of CPU and one rate token"):
// PROBED_APPLY_DRYRUN=<runs> runs it (PROBED_BIN as above), and it
// reports the server's user+system CPU per run, read from /proc.
func TestApplyDryRunCPU(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("PROBED_APPLY_DRYRUN"))
	if runs <= 0 {
		t.Skip("set PROBED_APPLY_DRYRUN=<runs> to measure (SECURITY.md, ApplyTargets bounds)")
	}
	bin := os.Getenv("PROBED_BIN")
	if bin == "" {
		bin = buildProbed(t)
	}
	dir := t.TempDir()
	p := &crashProcess{t: t, bin: bin, args: []string{"--addr", refused.Reserve(t).Addr(), "--data-dir", filepath.Join(dir, "data"),
		"--metrics-addr=", "--registrations-per-second=0"}}
	defer p.kill()
	if _, err := p.start(); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(p.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	set := client.TargetSet{Owner: "k8s/cluster", DryRun: true}
	for i := range 20_000 {
		set.Targets = append(set.Targets, &probev1.Target{
			Name:   fmt.Sprintf("ns-%d/pod-%d", i%100, i),
			Labels: map[string]string{"app": "web", "pod-template-hash": "5d4f8b7c9"},
			ReadinessProbe: &probev1.Probe{PeriodSeconds: 10, Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{
				Host: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), Port: 8080, Path: "/healthz"}}},
		})
	}
	c := client.New(conn)
	if _, err := c.ApplyTargets(t.Context(), set); err != nil { // warm up
		t.Fatal(err)
	}
	before := cpu(t, p.pid())
	for range runs {
		if _, err := c.ApplyTargets(t.Context(), set); err != nil {
			t.Fatal(err)
		}
	}
	spent := cpu(t, p.pid()) - before
	t.Logf("probed %s: %v of CPU per dry run of %d targets (%d runs)", bin, spent/time.Duration(runs), len(set.Targets), runs)
}

// cpu is the user and system CPU time process pid has used.
func cpu(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's ")": utime and stime are the 12th
	// and 13th, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
