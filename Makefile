# probed — run `make help` for the targets.
GO       ?= go
TOOL     := $(GO) tool -modfile=tools/go.mod
BUF      := $(TOOL) buf
BIN      := bin
DATA_DIR ?= ./probed-data
# make run's listeners; METRICS_ADDR=, UI_ADDR= or XDS_ADDR= turns one off.
ADDR         ?= 127.0.0.1:50051
UI_ADDR      ?= 127.0.0.1:8080
METRICS_ADDR ?= 127.0.0.1:9464
XDS_ADDR     ?= 127.0.0.1:18000
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
GOFILES   = $(shell git ls-files --cached --others --exclude-standard '*.go')

.DEFAULT_GOAL := help
.PHONY: help generate checkgenerate lint breaking build run demo cluster test test-cluster stress soak fuzz check clean tools kube-bins test-kube bench-kube image helm kube-demo

help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

generate: ## Regenerate the Go code of proto/ with buf.
	$(BUF) generate
	$(BUF) generate --template buf.gen.vtproto.yaml

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

# make run builds what it runs (probed) and what the README's session
# beside it runs (probectl); not probed-kube or probed-bench (make build).
run: ## Build bin/probed and bin/probectl and start probed; move it with ADDR, UI_ADDR, METRICS_ADDR, XDS_ADDR, DATA_DIR (e.g. make run ADDR=127.0.0.1:50052).
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/probed ./cmd/probectl
	$(BIN)/probed --addr '$(ADDR)' --data-dir '$(DATA_DIR)' --ui-addr '$(UI_ADDR)' --metrics-addr '$(METRICS_ADDR)' --xds-addr '$(XDS_ADDR)' --allow-self-probes

demo: ## Knative-style demo: probed and its status page, a flapping fake pod, the activator proxy and probectl watch (Ctrl-C stops all).
	GO=$(GO) ./examples/activator/demo.sh

cluster: ## Three probed replicas over a local etcd (built from the Go module proxy) on one machine (Ctrl-C stops all).
	GO=$(GO) BIN=$(BIN) ./examples/cluster/cluster.sh

# The product's tests: the main module (probed, probectl, the client,
# the examples) under the race detector, and the benchmark tool's (bench/).
# Nothing of the Kubernetes module or its control plane (make test-kube).
# Tests skipped for a missing prerequisite that CI requires (the browser
# test, the other-language examples) are listed at the end
# (.ci/skipreport): go test itself says nothing of a passing package's
# skips.
test: ## Run the product's tests: the main module with -race, bench/, and every benchmark once (about 10 min on 2 cores from an empty module cache; of the cluster process tests, the SIGKILL one). Kubernetes: make test-kube.
	@./.ci/skipreport \
		'$(GO) test -race -count=1 -timeout 20m ./...' \
		'cd bench && $(GO) test -count=1 -timeout 20m ./...' \
		'$(GO) test -run "^$$" -bench . -benchtime 1x -timeout 10m ./...'

# Every package of the main module STRESS_N times in a row under -race,
# with two busy loops beside it (.ci/stress; STRESS_PKGS narrows it, e.g.
# STRESS_PKGS=./engine/...). Long: it is not part of check.
STRESS_N    ?= 20
STRESS_PKGS ?= ./...
stress: ## Each package's tests 20 times in a row (STRESS_N) under -race beside two busy loops; STRESS_PKGS=./engine/... narrows it.
	GO=$(GO) ./.ci/stress -n $(STRESS_N) $(STRESS_PKGS)

# Without the race detector: the test process hosts etcd, which it slows
# several times (the replicas under test are built without it anyway).
test-cluster: ## The long cluster process tests: SIGSTOP of a replica, a fourth replica joining, etcd's leader lost or paused, etcd restored from a backup, a 20,000-target apply killed five times, the chaos soak's short form (~5 min on a quiet machine, 6–8 min under load).
	PROBED_CLUSTER_LONG=1 $(GO) test -count=1 -timeout 15m -run '^TestCluster(StopReplica|Join|EtcdLeaderLost|PausedReplicaProbesNothing|EtcdRestored|ApplyCrash)$$' ./cmd/probed
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

test-kube: kube-bins ## The kube module's tests (probed-kube) on a real control plane, required (PROBED_REQUIRE_KUBE=1): builds the control plane first (~10 min once, then cached).
	@./.ci/skipreport 'cd kube && PROBED_REQUIRE_KUBE=1 $(GO) test -race -count=1 -timeout 20m ./...'

bench-kube: kube-bins ## probed-kube's figures (BENCHMARKS.md): readiness latency beside kubelet's model, patches per flip with 2,000 pods, a 300-pod rollout, 10,000 pods, flapping beside steady pods (the controller a process of its own).
	cd kube && $(GO) build -o $(abspath $(BIN))/probed-kube ./cmd/probed-kube
	cd kube && PROBED_REQUIRE_KUBE=1 PROBED_KUBE_BENCH=1 PROBED_KUBE_CONTROLLER=$(abspath $(BIN))/probed-kube $(GO) test -count=1 -timeout 60m \
		-run '^(TestLatency|TestThousandsOfPods|TestRollout|TestTenThousandPods|TestFlappingBesideSteady|TestProbedRestart)$$' -v ./gate

image: ## Build the container image (static binaries, non-root, CA certificates) with no registry, tagged as the chart deploys it (probed:<appVersion>): bin/probed-image.tar (docker/podman/kind load) and the OCI layout bin/oci.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS) -s -w" -o $(BIN)/static/ ./cmd/probed ./cmd/probectl
	cd kube && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS) -s -w" -o $(abspath $(BIN))/static/ ./cmd/probed-kube
	cd kube && $(GO) run ./cmd/probed-image --chart $(abspath deploy/helm/probed) --version '$(VERSION)' --tar $(abspath $(BIN))/probed-image.tar --layout $(abspath $(BIN))/oci \
		$(abspath $(BIN))/static/probed $(abspath $(BIN))/static/probectl $(abspath $(BIN))/static/probed-kube
	cd kube && $(GO) test -count=1 -run '^TestMadeImage' ./image

kube-demo: kube-bins ## A control plane to try probed-kube on: probed and probed-kube with the chart's flags, examples/kubernetes/web.yaml served at its pod IPs, a flip every 3 s with its latency to the gate and the EndpointSlice; prints the KUBECONFIG for kubectl (Ctrl-C stops all).
	cd kube && $(GO) build -o $(abspath $(BIN))/probed-kube-demo ./cmd/probed-kube-demo
	$(BIN)/probed-kube-demo

helm: ## Build helm, pinned in kube/tools/go.mod, into bin/helm (a few minutes the first time, then cached): bin/helm install probed deploy/helm/probed ...
	cd kube/tools && $(GO) build -o $(abspath $(BIN))/helm helm.sh/helm/v3/cmd/helm
	@$(BIN)/helm version --short

check: checkgenerate lint breaking build test test-kube test-cluster fuzz ## Everything CI runs: the product's tests and the control plane's.

clean: ## Remove build output and the local data dir.
	rm -rf $(BIN) $(DATA_DIR) ./cluster-data
