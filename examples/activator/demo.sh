#!/usr/bin/env bash
# demo.sh (make demo): the Knative-style activator on probed, on loopback.
#
# Builds probed, probectl, the activator and the fake pod into a temporary
# directory, then starts:
#   - probed (temporary data dir, --min-period 50ms for the activator's
#     50 ms fast-until-ready probe) with its status page on $UI_ADDR;
#   - the fake pod, which starts listening after 1 s and then flaps: ready
#     for $FLAP, unready for $FLAP, ...;
#   - the activator in front of it (backend "hello");
#   - `probectl watch`, which prints every event as it arrives;
#   - a request through the activator every 2 s: the first one registers
#     the pod in probed and is held until the pod is ready; later ones are
#     held while the pod is unready.
# Ctrl-C stops everything it started and removes the temporary directory.
set -euo pipefail
set -m # every background job in its own process group, killed whole

GO=${GO:-go}
PROBED_ADDR=${PROBED_ADDR:-127.0.0.1:50071}
POD_ADDR=${POD_ADDR:-127.0.0.1:18081}
ACTIVATOR_ADDR=${ACTIVATOR_ADDR:-127.0.0.1:18080}
UI_ADDR=${UI_ADDR:-127.0.0.1:18082}
FLAP=${FLAP:-3s}

cd "$(dirname "$0")/../.."
tmp=$(mktemp -d "${TMPDIR:-/tmp}/probed-demo.XXXXXX")
pids=()

cleanup() {
	trap - INT TERM EXIT
	for pid in "${pids[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$tmp"
	echo "demo stopped"
}
trap cleanup EXIT
# Ctrl-C is how the demo ends: a success, so make reports no error.
trap 'exit 0' INT TERM

if command -v curl >/dev/null; then
	fetch() { curl -sS --max-time 30 -H 'Host: hello' -w ' [HTTP %{http_code}, %{time_total}s]' "$1"; }
elif command -v wget >/dev/null; then
	fetch() { wget -qO- --timeout=30 --header='Host: hello' "$1"; }
else
	echo "demo.sh needs curl or wget to send requests" >&2
	exit 1
fi

echo "building into $tmp/bin ..."
"$GO" build -o "$tmp/bin/" ./cmd/probed ./cmd/probectl \
	./examples/activator/cmd/activator ./examples/activator/cmd/fakepod
bin=$tmp/bin

# No Prometheus listener (--metrics-addr ""): nothing to collide with, make
# run's 127.0.0.1:9464 included.
"$bin/probed" --addr "$PROBED_ADDR" --ui-addr "$UI_ADDR" --data-dir "$tmp/data" --min-period 50ms \
	--metrics-addr "" 2>"$tmp/probed.log" &
pids+=($!)
for _ in $(seq 100); do
	"$bin/probectl" --addr "$PROBED_ADDR" list >/dev/null 2>&1 && break
	sleep 0.1
done
if ! "$bin/probectl" --addr "$PROBED_ADDR" list >/dev/null 2>&1; then
	echo "probed did not start:" >&2
	cat "$tmp/probed.log" >&2
	exit 1
fi

"$bin/fakepod" --addr "$POD_ADDR" --name hello --delay 1s --flap "$FLAP" 2>"$tmp/fakepod.log" &
pids+=($!)
"$bin/activator" --listen "$ACTIVATOR_ADDR" --probed "$PROBED_ADDR" \
	--backend "hello=$POD_ADDR" --failure-threshold 1 2>"$tmp/activator.log" &
pids+=($!)

cat <<EOF
probed      $PROBED_ADDR  (data and logs in $tmp)
status page http://$UI_ADDR/  (open it in a browser)
fake pod    $POD_ADDR  (listens in 1s, then ready/unready every $FLAP)
activator   $ACTIVATOR_ADDR  (try: curl -H 'Host: hello' http://$ACTIVATOR_ADDR/)
Ctrl-C stops everything.

EOF

"$bin/probectl" --addr "$PROBED_ADDR" watch &
pids+=($!)
sleep 0.2 # let the watch print its header first

(
	while :; do
		out=$(fetch "http://$ACTIVATOR_ADDR/" 2>&1 | tr -d '\n') || true
		echo "request through the activator: $out"
		sleep 2
	done
) &
pids+=($!)

wait
