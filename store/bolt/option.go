package bolt

import (
	"log/slog"
	"time"
)

// Default option values.
const (
	// DefaultLockTimeout is how long Open waits for another process to
	// release the data file's lock before failing with ErrLocked.
	DefaultLockTimeout = 500 * time.Millisecond
	// DefaultCompactBatch is how many events one compaction transaction
	// deletes at most.
	DefaultCompactBatch = 1000
)

// Option configures Open.
type Option func(*options)

type options struct {
	lockTimeout  time.Duration
	compactBatch int
	check        bool
	logger       *slog.Logger
}

func defaultOptions() options {
	return options{
		lockTimeout: DefaultLockTimeout, compactBatch: DefaultCompactBatch, check: true,
		logger: slog.New(slog.DiscardHandler),
	}
}

// WithLockTimeout sets how long Open waits for the data file's lock
// (default DefaultLockTimeout). A value <= 0 tries once and fails at once.
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) { o.lockTimeout = d }
}

// WithCompactBatch sets how many events one compaction transaction deletes
// at most (default DefaultCompactBatch; values < 1 mean 1). Smaller
// batches hold the single bbolt writer for less time, so commits wait less
// behind a background compaction; each batch costs one fsync.
func WithCompactBatch(n int) Option {
	return func(o *options) { o.compactBatch = max(n, 1) }
}

// WithCheck turns the full consistency check of the data file on Open on
// or off (default on). The check reads every page once, so that damage is
// reported as ErrCorrupt at startup rather than found (as a bbolt panic)
// in the middle of serving; it takes milliseconds for the sizes probed
// keeps (see BENCHMARKS.md). Turning it off does not turn off the cheaper
// checks (valid header, not truncated, known schema).
func WithCheck(on bool) Option {
	return func(o *options) { o.check = on }
}

// WithLogger sets where Open logs what it does beyond opening: the start
// and the end of an upgrade of an older data file (default: nowhere).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}
