package kubetest

import "testing"

func TestNamespaceName(t *testing.T) {
	for _, tc := range []struct{ name, base, want string }{
		{"a subtest", "TestRollout/wave_one", "testrollout-wave-one"},
		{"cut to 40", "TestAVeryLongNameOfATestThatGoesOnAndOnAndOn", "testaverylongnameofatestthatgoesonandona"},
		{"no dash at the cut", "TestAVeryLongNameOfATestThatGoesOnAndOn/x", "testaverylongnameofatestthatgoesonandon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NamespaceName(tc.base); got != tc.want {
				t.Errorf("NamespaceName(%q) = %q, want %q", tc.base, got, tc.want)
			}
		})
	}
}
