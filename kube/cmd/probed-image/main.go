// Command probed-image assembles probed's container image from static
// binaries, with no registry and no container runtime (`make image`):
//
//	probed-image --version v1 --tar bin/probed-image.tar --layout bin/oci bin/static/probed bin/static/probectl bin/static/probed-kube
//
// `docker load -i bin/probed-image.tar` or `podman load -i ...` loads it as
// probed:VERSION; the OCI layout suits skopeo, crane and registries.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/probed/probed/kube/image"
)

func main() {
	var (
		version    = flag.String("version", "dev", "image version: its tag and OCI label")
		tarPath    = flag.String("tar", "", "write a docker/podman-loadable tarball here")
		layoutDir  = flag.String("layout", "", "write an OCI image layout into this directory")
		entrypoint = flag.String("entrypoint", "probed", "binary the image runs")
		caCerts    = flag.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates to include")
		source     = flag.String("source", "https://github.com/probed/probed", "OCI source label")
	)
	flag.Parse()
	img, err := image.Build(image.Spec{
		Binaries: flag.Args(), Entrypoint: *entrypoint, CACerts: *caCerts,
		Version: *version, Source: *source,
	})
	if err == nil {
		err = image.Write(img, "probed:"+*version, *tarPath, *layoutDir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probed-image:", err)
		os.Exit(1)
	}
}
