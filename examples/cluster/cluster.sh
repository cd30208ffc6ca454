#!/usr/bin/env bash
# cluster.sh (make cluster): probed as three replicas over a local etcd, on
# one machine.
#
# Builds probed, probectl and etcd — etcd from the Go module proxy, at the
# version probed's go.mod pins (go.etcd.io/etcd/server/v3), no download
# of a binary — into bin/, then starts:
#   - etcd on $ETCD_ADDR (data in $DATA_DIR/etcd);
#   - three probed replicas, r1 r2 r3, on $BASE_PORT+1..3, each with its
#     status page on $UI_BASE_PORT+1..3 and its metrics (probed_cluster_*
#     among them) on $METRICS_BASE_PORT+1..3, lease TTL $LEASE_TTL.
# Logs go to $DATA_DIR/*.log. Ctrl-C stops everything (the replicas hand
# their targets over as they leave); the data stays in $DATA_DIR (remove
# it, or `make clean`, to start afresh).
set -euo pipefail
set -m # every background job in its own process group, killed whole

GO=${GO:-go}
BIN=${BIN:-bin}
DATA_DIR=${DATA_DIR:-./cluster-data}
ETCD_ADDR=${ETCD_ADDR:-127.0.0.1:2379}
ETCD_PEER_ADDR=${ETCD_PEER_ADDR:-127.0.0.1:2380}
BASE_PORT=${BASE_PORT:-50060}
UI_BASE_PORT=${UI_BASE_PORT:-8090}
METRICS_BASE_PORT=${METRICS_BASE_PORT:-9470}
LEASE_TTL=${LEASE_TTL:-5s}

cd "$(dirname "$0")/../.."
pids=()
cleanup() {
	trap - INT TERM EXIT
	# The replicas first (they leave the cluster through etcd), then etcd.
	local replicas=("${pids[@]:1}")
	for pid in "${replicas[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null || true
	done
	for pid in "${replicas[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if ((${#pids[@]} > 0)); then
		kill -TERM -- "-${pids[0]}" 2>/dev/null || true
	fi
	wait 2>/dev/null || true
	echo "cluster stopped (data kept in $DATA_DIR)"
}
trap cleanup EXIT
# Ctrl-C is how the cluster ends: a success, so make reports no error.
trap 'exit 0' INT TERM

echo "building probed, probectl and etcd into $BIN/ ..."
"$GO" build -o "$BIN/" ./cmd/probed ./cmd/probectl
"$GO" build -o "$BIN/etcd" go.etcd.io/etcd/server/v3
mkdir -p "$DATA_DIR"

"$BIN/etcd" --name local --data-dir "$DATA_DIR/etcd" \
	--listen-client-urls "http://$ETCD_ADDR" --advertise-client-urls "http://$ETCD_ADDR" \
	--listen-peer-urls "http://$ETCD_PEER_ADDR" --initial-advertise-peer-urls "http://$ETCD_PEER_ADDR" \
	--initial-cluster "local=http://$ETCD_PEER_ADDR" \
	--log-level warn >"$DATA_DIR/etcd.log" 2>&1 &
pids+=($!)
echo "etcd         http://$ETCD_ADDR   (log $DATA_DIR/etcd.log)"

for i in 1 2 3; do
	addr=127.0.0.1:$((BASE_PORT + i))
	ui=127.0.0.1:$((UI_BASE_PORT + i))
	metrics=127.0.0.1:$((METRICS_BASE_PORT + i))
	"$BIN/probed" --store etcd --etcd-endpoints "$ETCD_ADDR" --replica-id "r$i" \
		--addr "$addr" --ui-addr "$ui" --metrics-addr "$metrics" --lease-ttl "$LEASE_TTL" \
		>"$DATA_DIR/r$i.log" 2>&1 &
	pids+=($!)
	echo "replica r$i   $addr  status page http://$ui/  metrics http://$metrics/metrics  (log $DATA_DIR/r$i.log)"
done

echo
echo "try:  $BIN/probectl --addr 127.0.0.1:$((BASE_PORT + 1)) apply -f examples/targets/backend.yaml -f examples/cluster/targets/page.yaml"
echo "      $BIN/probectl --addr 127.0.0.1:$((BASE_PORT + 2)) list -o wide"
echo "      $BIN/probectl --addr 127.0.0.1:$((BASE_PORT + 3)) replicas"
echo "      curl -s http://127.0.0.1:$((METRICS_BASE_PORT + 1))/metrics | grep ^probed_cluster_"
echo "      kill -9 ${pids[2]}   # replica r2 dies: within 2 × $LEASE_TTL r1 and r3 probe its targets"
echo "Ctrl-C stops the cluster."
# A replica that dies is what a cluster is for: the script goes on. Only
# etcd's exit ends it.
# (wait also returns when etcd is merely stopped, SIGSTOP: wait again.)
while kill -0 "${pids[0]}" 2>/dev/null; do
	wait "${pids[0]}" || true
done
echo "etcd exited; see $DATA_DIR/etcd.log" >&2
