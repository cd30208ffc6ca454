package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
)

// largestTarget is a target as large as validation allows: 64 labels of
// the longest keys and values, and three HTTPS probes, each with 32
// headers of 4 KiB, the longest path, host and server name, a 10 KiB
// expected body and a 64 KiB CA bundle.
func largestTarget(t *testing.T, name string) *probev1.Target {
	t.Helper()
	label := strings.Repeat("a", 63)
	prefix := strings.Join([]string{label, label, label, strings.Repeat("b", 61)}, ".") // 253 bytes
	labels := make(map[string]string, target.MaxLabels)
	for i := range target.MaxLabels {
		labels[fmt.Sprintf("%s/%s%02d", prefix, label[:61], i)] = label
	}
	cert := selfSignedPEM(t)
	ca := strings.Repeat(cert, probe.MaxCAPEMBytes/len(cert))
	headers := make([]*probev1.HTTPHeader, probe.MaxHeaders)
	for i := range headers {
		n := fmt.Sprintf("X-H%02d", i)
		headers[i] = &probev1.HTTPHeader{Name: n, Value: strings.Repeat("v", probe.MaxHeaderBytes-len(n))}
	}
	p := func() *probev1.Probe {
		return &probev1.Probe{Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{
			Host: prefix, Port: 443, Path: "/" + strings.Repeat("p", probe.MaxPathBytes-1), Scheme: probev1.Scheme_SCHEME_HTTPS,
			HttpHeaders: headers, ExpectedBody: strings.Repeat("b", probe.MaxBodyBytes),
			Tls: &probev1.TLSConfig{CaPem: ca, ServerName: prefix},
		}}, PeriodSeconds: 3600}
	}
	return &probev1.Target{Name: name, Labels: labels, StartupProbe: p(), LivenessProbe: p(), ReadinessProbe: p()}
}

func selfSignedPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestLargestTargetsFitEveryResponse: no page, no Watch message, is more
// than a gRPC client accepts (4 MiB by default), however large the
// targets: eight of the largest valid ones (over 600 KiB each) come in
// several pages and messages of at most server.MaxResponseBytes, where
// one page of them, or one Watch batch, made clients fail with
// ResourceExhausted.
func TestLargestTargetsFitEveryResponse(t *testing.T) {
	s := probedtest.Start(t, probedtest.Options{})
	c := api(s)
	const n = 8
	for i := range n {
		tg := largestTarget(t, fmt.Sprintf("large-%d", i))
		if i == 0 {
			t.Logf("the largest target: %d bytes", proto.Size(tg))
		}
		if _, err := c.CreateTarget(t.Context(), &probev1.CreateTargetRequest{Target: tg}); err != nil {
			t.Fatalf("CreateTarget: %v", err)
		}
	}
	atMost := grpc.MaxCallRecvMsgSize(server.MaxResponseBytes)

	var names []string
	pages := 0
	for token := ""; ; pages++ {
		resp, err := c.ListTargets(t.Context(), &probev1.ListTargetsRequest{PageSize: 1000, PageToken: token}, atMost)
		if err != nil {
			t.Fatalf("ListTargets page %d: %v", pages, err)
		}
		for _, tg := range resp.GetTargets() {
			names = append(names, tg.GetName())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(names) != n || pages < 1 {
		t.Errorf("ListTargets gave %d targets in %d pages, want %d in several", len(names), pages+1, n)
	}

	for _, since := range []uint64{0, 1} {
		ctx, cancel := context.WithCancel(t.Context())
		st, err := c.Watch(ctx, &probev1.WatchRequest{SinceRevision: since}, atMost)
		if err != nil {
			t.Fatal(err)
		}
		got, messages := 0, 0
		for got < n {
			resp, err := st.Recv()
			if err != nil {
				t.Fatalf("Watch since %d, after %d events: %v", since, got, err)
			}
			messages++
			got += len(resp.GetEvents())
			if since == 0 && resp.GetSnapshotComplete() != (got == n) {
				t.Errorf("snapshot message %d: complete %v after %d of %d targets", messages, resp.GetSnapshotComplete(), got, n)
			}
		}
		cancel()
		if messages < 2 {
			t.Errorf("Watch since %d: %d events in %d message(s), want them split", since, got, messages)
		}
	}
}
