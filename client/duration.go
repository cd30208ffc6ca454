package client

import (
	"math"
	"time"
)

// ProbeDuration returns d as the seconds and milliseconds fields of a
// probe's duration (KEP-3066), ready to assign:
//
//	p.PeriodSeconds, p.PeriodMilliseconds = client.ProbeDuration(50 * time.Millisecond)
//
// The server adds the two fields after defaulting the seconds, as
// Kubernetes does (a period of 0 s means 10 s, a timeout of 0 s means
// 1 s), so a duration below a second is 1 s plus a negative number of
// milliseconds: 50 ms is 1 s − 950 ms, 1.5 s is 1 s + 500 ms, and 2 s is
// 2 s with milliseconds nil (unset). The pair adds up to d for every
// field, the initial delay (default 0) included.
//
// d is rounded away from zero to a whole millisecond, so only 0 gives
// (0, nil), which means the field's default. A negative d gives negative
// seconds, which the server rejects naming the field. Seconds beyond
// math.MaxInt32 are capped. For InitialPeriodSeconds, a pointer, assign
// the address of seconds.
func ProbeDuration(d time.Duration) (seconds int32, milliseconds *int32) {
	ms := int64(d / time.Millisecond)
	switch rest := d % time.Millisecond; {
	case rest > 0:
		ms++
	case rest < 0:
		ms--
	}
	if ms == 0 {
		return 0, nil
	}
	s, m := ms/1000, ms%1000
	if m < 0 { // floored: m in [0, 1000)
		s, m = s-1, m+1000
	}
	if s == 0 { // 0 s would be the field's default, not 0
		s, m = 1, m-1000
	}
	if s > math.MaxInt32 {
		return math.MaxInt32, nil
	}
	if m == 0 {
		return int32(s), nil
	}
	m32 := int32(m)
	return int32(s), &m32
}
