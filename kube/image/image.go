// Package image assembles probed's container image with no registry and
// no container runtime: a scratch image of one layer holding static
// binaries, CA certificates and a non-root user, written as a tarball
// (docker load, podman load) and an OCI image layout.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The image's non-root user and group (distroless's "nonroot").
const (
	UID  = 65532
	User = "65532:65532"
)

// CACertsPath is where the image holds the CA certificates (Go's
// crypto/x509 looks there first on Linux).
const CACertsPath = "/etc/ssl/certs/ca-certificates.crt"

// Spec describes the image.
type Spec struct {
	// Binaries are copied to /usr/local/bin/<base name>; they must be
	// static (the image has no libc).
	Binaries []string
	// Entrypoint is the name of the binary the image runs.
	Entrypoint string
	// CACerts is the PEM bundle copied to CACertsPath.
	CACerts string
	// Version and Source become OCI labels.
	Version, Source string
	// Created is the image's creation time (zero: the epoch, for
	// reproducible images).
	Created time.Time
}

// Build returns the image.
func Build(s Spec) (v1.Image, error) {
	layer, err := files(s)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: s.Created}
	cfg.Config.Entrypoint = []string{"/usr/local/bin/" + s.Entrypoint}
	cfg.Config.User = User
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + CACertsPath}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "probed",
		"org.opencontainers.image.description": "Kubernetes-style health probes with millisecond periods, and probed-kube, its readiness-gate controller",
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.source":      s.Source,
	}
	return mutate.ConfigFile(img, cfg)
}

// Write writes img as a tarball tagged ref at tarPath (when not empty)
// and as an OCI image layout in layoutDir (when not empty).
func Write(img v1.Image, ref, tarPath, layoutDir string) error {
	if tarPath != "" {
		tag, err := name.NewTag(ref)
		if err != nil {
			return err
		}
		if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
			return fmt.Errorf("write %s: %w", tarPath, err)
		}
	}
	if layoutDir != "" {
		_ = os.RemoveAll(layoutDir)
		p, err := layout.Write(layoutDir, empty.Index)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
			return fmt.Errorf("write %s: %w", layoutDir, err)
		}
	}
	return nil
}

// files is the image's one layer.
func files(s Spec) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := s.Created
	dirs := []string{"etc", "etc/ssl", "etc/ssl/certs", "usr", "usr/local", "usr/local/bin", "tmp", "home", "home/nonroot"}
	for _, d := range dirs {
		mode, uid := int64(0o755), 0
		switch d {
		case "tmp":
			mode = 0o1777
		case "home/nonroot":
			uid = UID
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	add := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, UID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID)
	if err := add("etc/passwd", 0o644, []byte(passwd)); err != nil {
		return nil, err
	}
	if err := add("etc/group", 0o644, []byte(group)); err != nil {
		return nil, err
	}
	certs, err := os.ReadFile(s.CACerts)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	if err := add(CACertsPath[1:], 0o644, certs); err != nil {
		return nil, err
	}
	for _, b := range s.Binaries {
		data, err := os.ReadFile(b)
		if err != nil {
			return nil, err
		}
		if err := add(path.Join("usr/local/bin", filepath.Base(b)), 0o755, data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}
