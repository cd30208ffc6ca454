package kubetest

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// namespaces counts the namespaces created per base name in this process.
var namespaces struct {
	mu   sync.Mutex
	runs map[string]int // guarded by mu
}

// Namespace creates a namespace for t on the shared plane, labelled
// labels, and returns its name: base made a valid name (lower case, "/"
// as "-", at most 40 characters, room for suffixes a test adds), and, when
// this process created that name before, with "-2", "-3", ... added. A
// test run again in the same binary (go test -count=N) thus gets a
// namespace of its own each time instead of finding the last run's (the
// plane outlives the tests; nothing deletes a test's namespace).
func (e *Env) Namespace(t testing.TB, base string, labels map[string]string) string {
	t.Helper()
	name := NamespaceName(base)
	namespaces.mu.Lock()
	if namespaces.runs == nil {
		namespaces.runs = map[string]int{}
	}
	namespaces.runs[name]++
	if n := namespaces.runs[name]; n > 1 {
		name += "-" + strconv.Itoa(n)
	}
	namespaces.mu.Unlock()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := e.Admin.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// NamespaceName makes base a namespace name: lower case, "/" and "_" as
// "-", cut to 40 characters, no "-" at either end.
func NamespaceName(base string) string {
	name := strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(base))
	if len(name) > 40 {
		name = name[:40]
	}
	return strings.Trim(name, "-")
}
