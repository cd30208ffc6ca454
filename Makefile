# probed — run `make help` for the targets.
GO       ?= go
TOOL     := $(GO) tool -modfile=tools/go.mod
BUF      := $(TOOL) buf
BIN      := bin
DATA_DIR ?= ./probed-data
# make run's listeners; METRICS_ADDR= or UI_ADDR= turns one off.
ADDR         ?= 127.0.0.1:50051
UI_ADDR      ?= 127.0.0.1:8080
METRICS_ADDR ?= 127.0.0.1:9464
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
GOFILES   = $(shell git ls-files --cached --others --exclude-standard '*.go')

.DEFAULT_GOAL := help
.PHONY: help generate checkgenerate lint breaking build run demo cluster test test-cluster soak fuzz check clean tools kube-bins test-kube bench-kube image

help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

generate: ## Regenerate the Go code of proto/ with buf.
	$(BUF) generate

checkgenerate: generate ## Fail if the committed generated code differs from a fresh generate.
	@if [ -n "$$(git status --porcelain -- proto/)" ]; then \
		git status --porcelain -- proto/; git diff --stat -- proto/; \
		echo "generated code is out of date: run 'make generate' and commit"; exit 1; fi

lint: ## buf lint and format, gofmt, go mod tidy, go vet, golangci-lint (of the main module, kube/ and bench/).
	$(BUF) lint
	$(BUF) format -d --exit-code
	@out="$$(gofmt -l $(GOFILES))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(TOOL) golangci-lint run ./...
	cd kube && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) tool -modfile=../tools/go.mod golangci-lint run ./...
	cd bench && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) tool -modfile=../tools/go.mod golangci-lint run ./...

breaking: ## buf breaking against the main branch (when main has the proto).
	@if git rev-parse --verify --quiet main:proto/probe/v1/probe.proto >/dev/null; then \
		$(BUF) breaking --against '.git#branch=main'; \
	else echo "breaking: main has no proto yet; skipped"; fi

tools: ## Build the pinned go tools (buf, grpcurl, golangci-lint, protoc-gen-go*) once: minutes the first time, then cached.
	@for t in buf grpcurl golangci-lint protoc-gen-go protoc-gen-go-grpc; do \
		echo "building $$t ..."; $(TOOL) -n $$t >/dev/null || exit 1; done
	@echo "tools built: the first go tool -modfile=tools/go.mod ... now starts at once"

build: ## Build probed, probectl, probed-bench and probed-kube into bin/.
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...
	cd kube && $(GO) build -ldflags "$(LDFLAGS)" -o $(abspath $(BIN))/ ./cmd/probed-kube
	cd bench && $(GO) build -ldflags "$(LDFLAGS)" -o $(abspath $(BIN))/ ./cmd/probed-bench

run: build ## Start probed; move it with ADDR, UI_ADDR, METRICS_ADDR, DATA_DIR (e.g. make run ADDR=127.0.0.1:50052).
	$(BIN)/probed --addr '$(ADDR)' --data-dir '$(DATA_DIR)' --ui-addr '$(UI_ADDR)' --metrics-addr '$(METRICS_ADDR)' --allow-self-probes

demo: ## Knative-style demo: probed and its status page, a flapping fake pod, the activator proxy and probectl watch (Ctrl-C stops all).
	GO=$(GO) ./examples/activator/demo.sh

cluster: ## Three probed replicas over a local etcd (built from the Go module proxy) on one machine (Ctrl-C stops all).
	GO=$(GO) BIN=$(BIN) ./examples/cluster/cluster.sh

# Tests skipped for a missing prerequisite that CI requires (the browser
# test, the other-language examples) are listed at the end: go test itself
# says nothing of a passing package's skips.
SKIP_REPORT ?= $(CURDIR)/.test-skipped
test: kube-bins ## Run every test, with the race detector but the benchmark tool's (bench/), the kube module's on a real control plane too (about 15 min on 2 cores, plus ~10 min once to build the control plane; of the cluster process tests, the SIGKILL one).
	@rm -f '$(SKIP_REPORT)'
	@PROBED_SKIP_REPORT='$(SKIP_REPORT)' $(GO) test -race -count=1 -timeout 20m ./...; rc=$$?; \
	(cd kube && PROBED_SKIP_REPORT='$(SKIP_REPORT)' $(GO) test -race -count=1 -timeout 20m ./...) || rc=1; \
	(cd bench && PROBED_SKIP_REPORT='$(SKIP_REPORT)' $(GO) test -count=1 -timeout 20m ./...) || rc=1; \
	if [ -s '$(SKIP_REPORT)' ]; then echo; echo "SKIPPED here, required in CI:"; sed 's/^/  /' '$(SKIP_REPORT)'; fi; \
	rm -f '$(SKIP_REPORT)'; exit $$rc

# Without the race detector: the test process hosts etcd, which it slows
# several times (the replicas under test are built without it anyway).
test-cluster: ## The long cluster process tests: SIGSTOP of a replica, a fourth replica joining, etcd's leader lost or paused, etcd restored from a backup, the chaos soak's short form (~2.5 min on a quiet machine, 3–4 min under load).
	PROBED_CLUSTER_LONG=1 $(GO) test -count=1 -timeout 10m -run '^TestCluster(StopReplica|Join|EtcdLeaderLost|PausedReplicaProbesNothing|EtcdRestored)$$' ./cmd/probed
	PROBED_CLUSTER_LONG=1 $(GO) test -count=1 -timeout 5m -run '^TestLeaderPauseKeepsLease$$' ./cluster
	PROBED_CLUSTER_LONG=1 $(GO) test -count=1 -timeout 10m -run '^TestClusterSoak$$' ./internal/clustersoak

# The chaos soak of cluster mode at its full length (internal/clustersoak,
# docs/cluster.md "What the soak checks"); PROBED_SOAK_SEED=<seed> replays
# the schedule of a run (each run prints its seed).
SOAK ?= 10m
soak: ## The cluster chaos soak at full length: 3 etcd members, 5 replicas, 400 flipping targets, rounds of faults for $(SOAK) (SOAK=5m shortens it), figures printed.
	PROBED_SOAK=$(SOAK) $(GO) test -count=1 -timeout 90m -v -run '^TestClusterSoak$$' ./internal/clustersoak

# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# fail a target with "context deadline exceeded" at the deadline, having
# found nothing (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 20000x
fuzz: ## Run each fuzz target for $(FUZZTIME) inputs (seed corpora under */testdata/fuzz run in `test` too).
	$(GO) test -run '^$$' -fuzz '^FuzzValidate$$' -fuzztime $(FUZZTIME) ./engine/probe
	$(GO) test -run '^$$' -fuzz '^FuzzValidate$$' -fuzztime $(FUZZTIME) ./engine/target
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./engine/feature
	$(GO) test -run '^$$' -fuzz '^FuzzConvert$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzWatchRequest$$' -fuzztime $(FUZZTIME) ./server
	$(GO) test -run '^$$' -fuzz '^FuzzHTTPResponse$$' -fuzztime $(FUZZTIME) ./check
	$(GO) test -run '^$$' -fuzz '^FuzzValidSpecRuns$$' -fuzztime $(FUZZTIME) ./check
	$(GO) test -run '^$$' -fuzz '^FuzzBoundMessage$$' -fuzztime $(FUZZTIME) ./engine/probe
	$(GO) test -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME) ./store/codec

# The kube module (kube/go.mod: probed-kube, client-go) is outside ./...;
# its tests run on a real control plane, built once into a cache outside
# the repository (kube/controlplane/build.sh; PROBED_KUBE_BIN moves it).
kube-bins: ## Build kube-apiserver, kube-controller-manager v1.37.2 and etcd for the kube tests into ~/.cache/probed (cold ~10 min, warm ~30 s, then reused).
	GO=$(GO) ./kube/controlplane/build.sh

test-kube: kube-bins ## Only the kube module's tests (part of `test`) on a real control plane, required (PROBED_REQUIRE_KUBE=1).
	cd kube && PROBED_REQUIRE_KUBE=1 $(GO) test -race -count=1 -timeout 20m ./...

bench-kube: kube-bins ## probed-kube's figures (BENCHMARKS.md): readiness latency beside kubelet's period model, and patches per flip with 2,000 pods.
	cd kube && PROBED_REQUIRE_KUBE=1 PROBED_KUBE_BENCH=1 $(GO) test -count=1 -timeout 20m -run '^(TestLatency|TestThousandsOfPods)$$' -v ./gate

image: ## Build the container image (static binaries, non-root, CA certificates) with no registry: bin/probed-image.tar (docker/podman load) and the OCI layout bin/oci.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS) -s -w" -o $(BIN)/static/ ./cmd/probed ./cmd/probectl
	cd kube && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS) -s -w" -o $(abspath $(BIN))/static/ ./cmd/probed-kube
	cd kube && $(GO) run ./cmd/probed-image --version '$(VERSION)' --tar $(abspath $(BIN))/probed-image.tar --layout $(abspath $(BIN))/oci \
		$(abspath $(BIN))/static/probed $(abspath $(BIN))/static/probectl $(abspath $(BIN))/static/probed-kube
	cd kube && $(GO) test -count=1 -run '^TestMadeImage$$' ./image

check: checkgenerate lint breaking build test test-cluster fuzz ## Everything CI runs.

clean: ## Remove build output and the local data dir.
	rm -rf $(BIN) $(DATA_DIR) ./cluster-data
