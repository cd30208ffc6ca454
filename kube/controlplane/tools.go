//go:build tools

// Package controlplane pins the Kubernetes control plane that the kube
// module's tests run against: kube-apiserver and kube-controller-manager
// of k8s.io/kubernetes v1.37.2, built from the Go module proxy by
// build.sh (`make kube-bins`). Its go.mod replaces every staging module
// k8s.io/kubernetes requires at v0.0.0 with its v0.37.2 release.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
