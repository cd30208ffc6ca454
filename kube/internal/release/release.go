// Package release renders probed's Helm chart (deploy/helm/probed) with
// the helm pinned in kube/tools/go.mod, and prepares its workloads to run
// as local processes with the chart's own flags: the files their volumes
// mount, written from the rendered Secrets and ConfigMaps, and their
// arguments, with those paths and the listen addresses moved where a
// process outside a cluster can use them. The demo (make kube-demo) and
// the tests that run probed and probed-kube as the chart does share it.
package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ChartDir is the chart's directory in the repository.
const ChartDir = "deploy/helm/probed"

// Root returns the repository's root directory, asking the go command
// for the main module's directory from the working directory (the
// repository, or kube/, which replaces it with ../).
func Root(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/probed/probed").Output()
	if err != nil {
		return "", fmt.Errorf("finding the repository (run inside it): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Helm runs the pinned helm in root with args and returns its standard
// output; an error carries its standard error.
func Helm(ctx context.Context, root string, args ...string) ([]byte, error) {
	bin, err := HelmBinary(ctx, root)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// HelmEnv names the environment variable that, when set, is the path of
// the pinned helm: kubetest sets it for tests that run inside a network
// namespace, where the go command cannot reach the module proxy.
const HelmEnv = "PROBED_HELM"

// helmBinaries are the paths of the pinned helm, by repository root:
// `go tool` builds it once into the build cache, and asking it for the
// path once saves its staleness check of helm's many packages on every
// call (seconds each on a loaded machine).
var helmBinaries sync.Map

// HelmBinary returns the path of the helm pinned in root's
// kube/tools/go.mod (HelmEnv's value when set), building it into the
// build cache the first time (minutes, with the module proxy).
func HelmBinary(ctx context.Context, root string) (string, error) {
	if p := os.Getenv(HelmEnv); p != "" {
		return p, nil
	}
	if p, ok := helmBinaries.Load(root); ok {
		return p.(string), nil
	}
	cmd := exec.CommandContext(ctx, "go", "tool", "-modfile="+filepath.Join(root, "kube", "tools", "go.mod"), "-n", "helm")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building helm (go tool -modfile=kube/tools/go.mod -n helm): %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	p := strings.TrimSpace(string(out))
	helmBinaries.Store(root, p)
	return p, nil
}

// Release is the chart rendered by `helm template`.
type Release struct {
	Name, Namespace string
	// Manifests is helm's output.
	Manifests []byte
	// Objects are its objects, in order.
	Objects []*unstructured.Unstructured
}

// Render renders the chart of the repository at root as release name in
// namespace, with more arguments of `helm template` (e.g. "--set",
// "key=value").
func Render(ctx context.Context, root, name, namespace string, args ...string) (*Release, error) {
	out, err := Helm(ctx, root, append([]string{"template", name, ChartDir, "--namespace", namespace}, args...)...)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(out)
	if err != nil {
		return nil, err
	}
	return &Release{Name: name, Namespace: namespace, Manifests: out, Objects: objs}, nil
}

// Decode decodes a stream of YAML documents, skipping empty ones.
func Decode(manifests []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// Find returns the object of that kind and name, or nil.
func (r *Release) Find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.Objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// Kind returns the objects of a kind.
func (r *Release) Kind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// Convert converts a rendered object into its typed form (into points to
// e.g. an appsv1.Deployment).
func Convert(obj *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// PodSpec returns the pod template of the StatefulSet or Deployment name.
// A StatefulSet's template gets a volume for each of its claim
// templates, as the StatefulSet controller gives its pod 0, so that
// every mount has its volume.
func (r *Release) PodSpec(kind, name string) (*corev1.PodTemplateSpec, error) {
	obj := r.Find(kind, name)
	if obj == nil {
		return nil, fmt.Errorf("the release has no %s %s", kind, name)
	}
	switch kind {
	case "StatefulSet":
		var s appsv1.StatefulSet
		if err := Convert(obj, &s); err != nil {
			return nil, err
		}
		for _, claim := range s.Spec.VolumeClaimTemplates {
			s.Spec.Template.Spec.Volumes = append(s.Spec.Template.Spec.Volumes, corev1.Volume{
				Name: claim.Name,
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: claim.Name + "-" + name + "-0",
				}},
			})
		}
		return &s.Spec.Template, nil
	case "Deployment":
		var d appsv1.Deployment
		if err := Convert(obj, &d); err != nil {
			return nil, err
		}
		return &d.Spec.Template, nil
	}
	return nil, fmt.Errorf("%s is not a workload kind", kind)
}

// SecretData returns the data of the rendered Secret name, or nil.
func (r *Release) SecretData(name string) (map[string][]byte, error) {
	obj := r.Find("Secret", name)
	if obj == nil {
		return nil, nil
	}
	var s corev1.Secret
	if err := Convert(obj, &s); err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range s.Data {
		data[k] = v
	}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return data, nil
}

// Local is a container of a workload prepared to run as a process.
type Local struct {
	// Args are the container's arguments (see Prepare).
	Args []string
	// Files are the paths written, by mount path.
	Files map[string]string
}

// Prepare prepares the container of pod: it writes the files of its
// Secret and ConfigMap volumes under dir (mount path /etc/probed/tls
// becomes dir/etc/probed/tls), from the release's objects or, for Secrets
// the release does not hold (existingSecret values), from secrets (by
// name), and returns its arguments with $(VAR) expanded from env, the
// paths of those mounts moved under dir, and the flags named in set
// ("--addr") given those values instead. A flag of set that the container
// does not have is an error: the chart changed.
func (r *Release) Prepare(pod *corev1.PodTemplateSpec, container, dir string, env map[string]string, secrets map[string]map[string][]byte, set map[string]string) (*Local, error) {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		return nil, fmt.Errorf("no container %s", container)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	local := &Local{Files: map[string]string{}}
	var mounts []string
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("mount %s: no volume %s", m.MountPath, m.Name)
		}
		data, items, err := r.volumeData(v, secrets)
		if err != nil {
			return nil, err
		}
		if data == nil {
			continue // not a Secret or ConfigMap: a data volume
		}
		target := filepath.Join(dir, m.MountPath)
		if err := os.MkdirAll(target, 0o700); err != nil {
			return nil, err
		}
		if len(items) == 0 {
			for k := range data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			b, ok := data[it.Key]
			if !ok {
				return nil, fmt.Errorf("volume %s: no key %s", m.Name, it.Key)
			}
			p := filepath.Join(target, it.Path)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				return nil, err
			}
			local.Files[filepath.Join(m.MountPath, it.Path)] = p
		}
		mounts = append(mounts, m.MountPath)
	}
	seen := map[string]bool{}
	for _, a := range c.Args {
		a = expand(a, env)
		name, value, hasValue := strings.Cut(a, "=")
		if v, ok := set[name]; ok && hasValue {
			a, seen[name] = name+"="+v, true
		} else if hasValue {
			for _, m := range mounts {
				if strings.HasPrefix(value, m+"/") {
					a = name + "=" + filepath.Join(dir, value)
				}
			}
		}
		local.Args = append(local.Args, a)
	}
	for name := range set {
		if !seen[name] {
			return nil, fmt.Errorf("container %s has no flag %s=...: %v", container, name, c.Args)
		}
	}
	return local, nil
}

// volumeData returns the data of a Secret or ConfigMap volume (nil for
// other volumes) and the items it selects.
func (r *Release) volumeData(v corev1.Volume, secrets map[string]map[string][]byte) (map[string][]byte, []corev1.KeyToPath, error) {
	switch {
	case v.Secret != nil:
		data, err := r.SecretData(v.Secret.SecretName)
		if err != nil {
			return nil, nil, err
		}
		if data == nil {
			data = secrets[v.Secret.SecretName]
		}
		if data == nil {
			return nil, nil, fmt.Errorf("volume %s: Secret %s is neither in the release nor given", v.Name, v.Secret.SecretName)
		}
		return data, v.Secret.Items, nil
	case v.ConfigMap != nil:
		obj := r.Find("ConfigMap", v.ConfigMap.Name)
		if obj == nil {
			return nil, nil, fmt.Errorf("volume %s: ConfigMap %s not in the release", v.Name, v.ConfigMap.Name)
		}
		var cm corev1.ConfigMap
		if err := Convert(obj, &cm); err != nil {
			return nil, nil, err
		}
		data := map[string][]byte{}
		for k, s := range cm.Data {
			data[k] = []byte(s)
		}
		return data, v.ConfigMap.Items, nil
	}
	return nil, nil, nil
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand expands $(VAR) as kubelet does, from env; unknown ones stay.
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}
