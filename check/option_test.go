package check

import "testing"

func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      Options
		wantUA  string
		wantMax int
	}{
		{name: "zero", wantUA: "probed/dev", wantMax: 10 << 10},
		{name: "negative max", in: Options{MaxBodyBytes: -1}, wantUA: "probed/dev", wantMax: 10 << 10},
		{name: "set", in: Options{UserAgent: "probed/1.0", MaxBodyBytes: 5}, wantUA: "probed/1.0", wantMax: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.in.withDefaults()
			if got.UserAgent != tt.wantUA || got.MaxBodyBytes != tt.wantMax {
				t.Errorf("withDefaults() = UserAgent %q, MaxBodyBytes %d; want %q, %d", got.UserAgent, got.MaxBodyBytes, tt.wantUA, tt.wantMax)
			}
		})
	}
	t.Run("allowlist copied", func(t *testing.T) {
		t.Parallel()
		list := []string{"/bin/true"}
		got := Options{ExecAllowlist: list}.withDefaults()
		list[0] = "/bin/sh"
		if got.ExecAllowlist[0] != "/bin/true" {
			t.Errorf("withDefaults() shares ExecAllowlist with the caller")
		}
	})
}
