package probedproc

import "sync"

// logLimit is how much of a process's output a Log keeps.
const logLimit = 1 << 20

// Log keeps the first MiB written to it, from any number of goroutines
// at once (a child process's stdout and stderr are copied by two); what
// comes after is dropped. The zero value is an empty Log.
type Log struct {
	mu  sync.Mutex
	buf []byte // guarded by mu
}

// Write keeps what fits of b and reports all of it written.
func (l *Log) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := logLimit - len(l.buf); room > 0 {
		l.buf = append(l.buf, b[:min(len(b), room)]...)
	}
	return len(b), nil
}

// String is what was kept.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}
