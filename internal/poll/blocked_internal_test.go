package poll

import "testing"

func TestCountBlocked(t *testing.T) {
	t.Parallel()
	stacks := `goroutine 7 [select]:
github.com/probed/probed/engine.(*Engine).Create(0xc0)
	/engine/lifecycle.go:40

goroutine 8 [chan receive]:
github.com/probed/probed/engine.(*Engine).Create(0xc0)
	/engine/lifecycle.go:41

goroutine 9 [running]:
github.com/probed/probed/engine.(*Engine).Create(0xc0)

goroutine 10 [select]:
github.com/probed/probed/engine.(*Engine).Update(0xc0)`
	tests := []struct {
		name string
		fn   string
		want int
	}{
		{"blocked on a select or a receive", "engine.(*Engine).Create", 2},
		{"another function", "engine.(*Engine).Update", 1},
		{"not on any stack", "engine.(*Engine).Delete", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := countBlocked(stacks, tt.fn); got != tt.want {
				t.Errorf("countBlocked(%s) = %d, want %d", tt.fn, got, tt.want)
			}
		})
	}
}
