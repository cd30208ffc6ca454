// Package activator is an example of a Knative-style component built on
// probed: an activator that holds the requests of a scaled-from-zero
// backend until probed says the backend is ready, then forwards them.
//
//   - proxy: the reverse proxy (register a target, WaitReady, forward,
//     delete the target when the backend goes away);
//   - pod: a fake pod that starts listening after a delay and answers
//     Knative's readiness probe (GET with "K-Network-Probe: queue");
//   - cmd/activator and cmd/fakepod: the two as programs, used by demo.sh
//     (make demo).
//
// The end-to-end test of this package runs the three together: a real
// probed, the proxy and a pod that starts after the first request.
package activator
