package gate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed/probed/kube/internal/kubetest"
)

// TestOnlyUIDMismatchIsBenign: of the patches the API server refuses as
// invalid, only the one whose UID precondition failed (the pod was
// replaced by one of the same name) is taken as "the pod is gone"; any
// other is an error to log and retry.
func TestOnlyUIDMismatchIsBenign(t *testing.T) {
	env := kubetest.Get(t)
	ctx := t.Context()
	ns := env.Namespace(t, "uid-mismatch", nil)
	pod, err := env.Admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	send := func(patch []byte) error {
		_, err := env.Admin.CoreV1().Pods(ns).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "test"}, "status")
		return err
	}
	ready := condition{status: corev1.ConditionTrue, reason: ReasonReady}

	// A pod of the same name, another UID: the patch of the old one.
	old := pod.DeepCopy()
	old.UID = "00000000-0000-0000-0000-000000000001"
	patch, _, err := ready.patch(old, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	err = send(patch)
	if err == nil {
		t.Fatal("a patch with another pod's UID was accepted")
	}
	if !isUIDMismatch(err) {
		t.Errorf("UID precondition failure %v (%T) not recognised", err, err)
	}
	t.Logf("UID precondition failure: %v", err)

	// Invalid for another reason: an error.
	for name, bad := range map[string]string{
		"negative observedGeneration": `{"metadata": {"uid": "` + string(pod.UID) + `"}, "status": {"conditions": [{"type": "probed.io/ready", "status": "True", "observedGeneration": -1}]}}`,
		"bad condition type":          `{"metadata": {"uid": "` + string(pod.UID) + `"}, "status": {"conditions": [{"type": "probed.io/not a name", "status": "True"}]}}`,
	} {
		err := send([]byte(bad))
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		if isUIDMismatch(err) {
			t.Errorf("%s: %v taken for a UID precondition failure", name, err)
		}
	}
}
