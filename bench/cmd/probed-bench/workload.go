package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// targetsFlag defines --targets, the numbers of targets of the benchmarks
// of a real probed (e2e, scale), on fs.
func targetsFlag(fs *flag.FlagSet, targets *[]int) {
	fs.Func("targets", "number of targets; a comma-separated list runs each (default 1000)", func(s string) error {
		var err error
		*targets, err = parseInts(s)
		return err
	})
}

// parseInts parses a comma-separated list of integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// checkTargetsAndPeriod defaults targets to 1000 and checks them and the
// probe period, which probed takes in whole milliseconds.
func checkTargetsAndPeriod(targets *[]int, period time.Duration) error {
	if len(*targets) == 0 {
		*targets = []int{1000}
	}
	for _, n := range *targets {
		if n < 1 {
			return fmt.Errorf("--targets must be positive, got %d", n)
		}
	}
	if period < time.Millisecond || period%time.Millisecond != 0 {
		return fmt.Errorf("--period must be a whole number of milliseconds, at least 1ms")
	}
	return nil
}
