// Command probed-image assembles probed's container image from static
// binaries, with no registry and no container runtime (`make image`):
//
//	probed-image --chart deploy/helm/probed --version v0.1.0-3-gabc1234 --tar bin/probed-image.tar --layout bin/oci bin/static/probed bin/static/probectl bin/static/probed-kube
//
// The image is tagged with the reference the Helm chart deploys by default
// (--chart: its image.repository and appVersion, e.g. probed:dev), or with
// --ref; --version is its OCI version label. `docker load -i
// bin/probed-image.tar` or `podman load -i ...` (kind load image-archive,
// k3s ctr images import) loads it under that reference; the OCI layout
// suits skopeo, crane and registries.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/probed/probed/kube/image"
)

func main() {
	var (
		version    = flag.String("version", "dev", "image version: its OCI version label")
		chartDir   = flag.String("chart", "", "tag the image as this Helm chart's default image (image.repository:appVersion)")
		ref        = flag.String("ref", "", "tag the image with this reference instead of --chart's")
		tarPath    = flag.String("tar", "", "write a docker/podman-loadable tarball here")
		layoutDir  = flag.String("layout", "", "write an OCI image layout into this directory")
		entrypoint = flag.String("entrypoint", "probed", "binary the image runs")
		caCerts    = flag.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates to include")
		source     = flag.String("source", "https://github.com/probed/probed", "OCI source label")
	)
	flag.Parse()
	if (*ref == "") == (*chartDir == "") {
		fmt.Fprintln(os.Stderr, "probed-image: give exactly one of --chart and --ref")
		os.Exit(2)
	}
	if *chartDir != "" {
		r, err := image.ChartRef(*chartDir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "probed-image:", err)
			os.Exit(1)
		}
		*ref = r
	}
	img, err := image.Build(image.Spec{
		Binaries: flag.Args(), Entrypoint: *entrypoint, CACerts: *caCerts,
		Version: *version, Source: *source,
	})
	if err == nil {
		err = image.Write(img, *ref, *tarPath, *layoutDir)
	}
	if err == nil {
		fmt.Println("probed-image: wrote", *ref)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probed-image:", err)
		os.Exit(1)
	}
}
