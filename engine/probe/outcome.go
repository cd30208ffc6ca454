package probe

import "time"

// Outcome is what one execution of a check produced. A target that fails
// its check is an outcome (Failure with a message), never a Go error.
type Outcome struct {
	Result  Result
	Message string        // human-readable, e.g. "HTTP probe failed with statuscode: 503"
	Latency time.Duration // from the start of the check to its end
	// Phases breaks the latency down where the checker can (HTTP: DNS,
	// connect, TLS, first byte); zero values mean "not measured".
	Phases Phases
}

// Phases are the parts of a network check's latency, as blackbox_exporter
// reports them, so a slow target can be told from a slow network.
type Phases struct {
	DNS       time.Duration
	Connect   time.Duration
	TLS       time.Duration
	FirstByte time.Duration // from the request written to the first response byte
}
