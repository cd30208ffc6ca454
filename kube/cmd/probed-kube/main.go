// Command probed-kube is probed's readiness-gate controller.
package main

import (
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/leaderelection"
	_ "github.com/probed/probed/client"
)

func main() {}
