package image

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"
)

// ChartRef returns the image reference the Helm chart in chartDir deploys
// by default: values.yaml's image.repository, and image.tag or, when that
// is empty, Chart.yaml's appVersion (as the chart's templates do). `make
// image` tags the image with it, so that a default install runs exactly
// the image built.
func ChartRef(chartDir string) (string, error) {
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := readYAML(filepath.Join(chartDir, "Chart.yaml"), &chart); err != nil {
		return "", err
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
			Digest     string `json:"digest"`
		} `json:"image"`
	}
	if err := readYAML(filepath.Join(chartDir, "values.yaml"), &values); err != nil {
		return "", err
	}
	img := values.Image
	if img.Digest != "" {
		return "", fmt.Errorf("%s: image.digest is set by default: no build can match it", chartDir)
	}
	tag := img.Tag
	if tag == "" {
		tag = chart.AppVersion
	}
	if img.Repository == "" || tag == "" {
		return "", errors.New(chartDir + ": no image.repository, or neither image.tag nor appVersion")
	}
	ref := img.Repository + ":" + tag
	if _, err := name.NewTag(ref); err != nil {
		return "", fmt.Errorf("%s: the default image %q: %w", chartDir, ref, err)
	}
	return ref, nil
}

func readYAML(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
