package etcd_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/probed/probed/internal/etcdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, etcdtest.LeakOptions()...)
}
