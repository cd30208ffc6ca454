package main

import (
	"slices"
	"testing"
	"time"
)

func TestCheckTargetsAndPeriod(t *testing.T) {
	tests := []struct {
		name    string
		targets []int
		period  time.Duration
		want    []int
		wantErr bool
	}{
		{name: "default", period: time.Second, want: []int{1000}},
		{name: "list", targets: []int{1, 10}, period: 100 * time.Millisecond, want: []int{1, 10}},
		{name: "zero targets", targets: []int{10, 0}, period: time.Second, wantErr: true},
		{name: "sub-millisecond period", targets: []int{1}, period: 1500 * time.Microsecond, wantErr: true},
		{name: "zero period", targets: []int{1}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			targets := tt.targets
			err := checkTargetsAndPeriod(&targets, tt.period)
			if (err != nil) != tt.wantErr {
				t.Fatalf("checkTargetsAndPeriod(%v, %v) = %v, want error %v", tt.targets, tt.period, err, tt.wantErr)
			}
			if !tt.wantErr && !slices.Equal(targets, tt.want) {
				t.Errorf("targets = %v, want %v", targets, tt.want)
			}
		})
	}
	if got, err := parseInts(" 1, 10,100 "); err != nil || !slices.Equal(got, []int{1, 10, 100}) {
		t.Errorf("parseInts = %v, %v", got, err)
	}
	if _, err := parseInts("1,x"); err == nil {
		t.Error("parseInts(1,x): no error")
	}
}
