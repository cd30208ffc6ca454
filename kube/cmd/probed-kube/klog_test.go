package main

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestRouteKlog: client-go's klog lines go to the logger of the latest
// run, loggers derived before it included, without setting klog's global
// logger again (a race with the klog reads of running goroutines).
func TestRouteKlog(t *testing.T) {
	derived := klog.Background().WithValues("controller", "pods").WithName("reflector")
	for _, run := range []string{"first", "second"} {
		var buf bytes.Buffer
		log, err := newLogger(&buf, "info", "json")
		if err != nil {
			t.Fatal(err)
		}
		routeKlog(log)
		klog.Background().Info("global " + run)
		derived.Info("derived " + run)
		klog.Flush()
		out := buf.String()
		for _, want := range []string{`"msg":"global ` + run + `"`, `"msg":"derived ` + run + `"`, `"controller":"pods"`} {
			if !strings.Contains(out, want) {
				t.Errorf("run %s: %s not in the log:\n%s", run, want, out)
			}
		}
	}
}
