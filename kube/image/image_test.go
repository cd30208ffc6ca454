package image_test

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/probed/probed/kube/image"
)

// checkImage checks what docker or podman would run: entrypoint,
// non-root user, labels, and the files of its layer.
func checkImage(t *testing.T, img v1.Image, binaries []string, version string) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Entrypoint; !slices.Equal(got, []string{"/usr/local/bin/probed"}) {
		t.Errorf("entrypoint %v", got)
	}
	if cfg.Config.User != image.User || cfg.Config.User == "" || cfg.Config.User[0] == '0' {
		t.Errorf("user %q; want the non-root %s", cfg.Config.User, image.User)
	}
	if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("version label %q; want %q", got, version)
	}
	if cfg.OS != "linux" || cfg.Architecture == "" {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	files := map[string]*tar.Header{}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files["/"+h.Name] = h
		}
		_ = rc.Close()
	}
	want := []string{image.CACertsPath, "/etc/passwd", "/etc/group", "/tmp/"}
	for _, b := range binaries {
		want = append(want, "/usr/local/bin/"+filepath.Base(b))
	}
	for _, f := range want {
		if files[f] == nil {
			t.Errorf("image has no %s", f)
		}
	}
	for _, b := range binaries {
		if h := files["/usr/local/bin/"+filepath.Base(b)]; h != nil && h.Mode&0o111 == 0 {
			t.Errorf("%s is not executable", h.Name)
		}
	}
}

func TestBuildWriteRead(t *testing.T) {
	dir := t.TempDir()
	var bins []string
	for _, b := range []string{"probed", "probectl", "probed-kube"} {
		p := filepath.Join(dir, b)
		if err := os.WriteFile(p, []byte("#!binary "+b), 0o755); err != nil {
			t.Fatal(err)
		}
		bins = append(bins, p)
	}
	certs := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(image.Spec{Binaries: bins, Entrypoint: "probed", CACerts: certs, Version: "v9"})
	if err != nil {
		t.Fatal(err)
	}
	tarPath, layoutDir := filepath.Join(dir, "img.tar"), filepath.Join(dir, "oci")
	if err := image.Write(img, "probed:v9", tarPath, layoutDir); err != nil {
		t.Fatal(err)
	}
	fromTar, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, fromTar, bins, "v9")

	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("OCI layout index: %v, %v", m, err)
	}
	fromLayout, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, fromLayout, bins, "v9")
}

// TestMadeImage checks the image `make image` wrote, when it is there.
func TestMadeImage(t *testing.T) {
	path := filepath.Join("..", "..", "bin", "probed-image.tar")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no %s: run `make image`", path)
	}
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, img, []string{"probed", "probectl", "probed-kube"}, cfg.Config.Labels["org.opencontainers.image.version"])
}

// TestMadeImageIsTheChartDefault: the image `make image` wrote carries
// exactly the reference the chart deploys by default.
func TestMadeImageIsTheChartDefault(t *testing.T) {
	path := filepath.Join("..", "..", "bin", "probed-image.tar")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no %s: run `make image`", path)
	}
	want, err := image.ChartRef(filepath.Join("..", "..", "deploy", "helm", "probed"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{want}) {
		t.Errorf("%s holds %+v; want one image tagged %s", path, m, want)
	}
}
