package wheel

import "time"

// Spread schedules id like Schedule, with its first fire at
// start + Phase(id, period). Items spread together are distributed
// uniformly over their period instead of firing in the same tick, and an
// item keeps its phase when it is spread again from the same start (or from
// a start a whole number of periods later), for instance after a restart.
func (w *Wheel) Spread(id ID, gen uint32, start time.Time, period time.Duration) error {
	if err := checkItem(id, period); err != nil {
		return err
	}
	return w.Schedule(id, gen, start.Add(Phase(id, period)), period)
}

// Phase returns the offset in [0, period) at which Spread starts id: a fixed
// hash of id (SplitMix64) modulo period. It returns 0 for a non-positive
// period.
func Phase(id ID, period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	return time.Duration(mix(uint64(id)) % uint64(period))
}

// mix is the SplitMix64 finalizer: a bijection of uint64 whose outputs for
// consecutive inputs look uniformly random.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
