package codec

import (
	"fmt"
	"math"
	"time"
)

// The instants a stored time can hold: Unix nanoseconds in an int64.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// timeToProto returns t as Unix nanoseconds, nil for the zero time.
func timeToProto(t time.Time, what string) (*int64, error) {
	if t.IsZero() {
		return nil, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return nil, fmt.Errorf("%s: %w", what, unencodable(t.String()+" (a stored time is within the years 1678–2262)"))
	}
	n := t.UnixNano()
	return &n, nil
}

// timeFromProto is the inverse of timeToProto.
func timeFromProto(n *int64) time.Time {
	if n == nil {
		return time.Time{}
	}
	return time.Unix(0, *n)
}
