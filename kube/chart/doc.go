// Package chart holds the tests of probed's Helm chart
// (deploy/helm/probed): helm lint, helm template, and the rendered
// manifests applied with server-side dry-run to a real API server.
package chart
