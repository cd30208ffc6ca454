package release

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// manifests are a StatefulSet with a claim template mounted beside a
// Secret and a ConfigMap, as the chart renders probed.
const manifests = `
apiVersion: v1
kind: Secret
metadata: {name: tls}
data: {tls.crt: Y3J0, tls.key: a2V5}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: policy}
data: {policy.yaml: "rules: []"}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: probed}
spec:
  serviceName: probed
  selector: {matchLabels: {app: probed}}
  template:
    metadata: {labels: {app: probed}}
    spec:
      containers:
      - name: probed
        image: probed:dev
        args: [--addr=0.0.0.0:50051, --tls-cert=/etc/tls/tls.crt, --authz-policy=/etc/policy/policy.yaml, --data-dir=/data, --id=$(POD_NAME), --other=$(UNKNOWN)]
        volumeMounts:
        - {name: tls, mountPath: /etc/tls}
        - {name: policy, mountPath: /etc/policy}
        - {name: data, mountPath: /data}
      volumes:
      - {name: tls, secret: {secretName: tls}}
      - {name: policy, configMap: {name: policy}}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`

// TestPrepareStatefulSet: a StatefulSet's pod has its claim templates'
// volumes (a mount of one is a data volume, not an error), its Secret and
// ConfigMap files are written under the directory, and its args point
// there, with $(VAR) expanded and the flags set replaced.
func TestPrepareStatefulSet(t *testing.T) {
	objs, err := Decode([]byte(manifests))
	if err != nil {
		t.Fatal(err)
	}
	r := &Release{Name: "probed", Namespace: "ns", Objects: objs}
	pod, err := r.PodSpec("StatefulSet", "probed")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	local, err := r.Prepare(pod, "probed", dir, map[string]string{"POD_NAME": "probed-0"}, nil, map[string]string{"--data-dir": dir + "/data"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"--addr=0.0.0.0:50051",
		"--tls-cert=" + filepath.Join(dir, "etc/tls/tls.crt"),
		"--authz-policy=" + filepath.Join(dir, "etc/policy/policy.yaml"),
		"--data-dir=" + dir + "/data",
		"--id=probed-0",
		"--other=$(UNKNOWN)",
	}
	if diff := cmp.Diff(want, local.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	for path, data := range map[string]string{"/etc/tls/tls.crt": "crt", "/etc/tls/tls.key": "key", "/etc/policy/policy.yaml": "rules: []"} {
		b, err := os.ReadFile(local.Files[path])
		if err != nil || string(b) != data {
			t.Errorf("%s: %q, %v; want %q", path, b, err, data)
		}
	}
	if _, err := r.Prepare(pod, "probed", dir, nil, nil, map[string]string{"--metrics-addr": "x"}); err == nil {
		t.Error("a flag set that the container lacks: no error")
	}
}
