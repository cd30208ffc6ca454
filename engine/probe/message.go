package probe

import (
	"strings"
	"unicode/utf8"
)

// MaxMessageBytes bounds the message of an outcome: kubelet's 10 KiB cap on
// probe output, which is what a message quotes. A probe target writes what
// it likes into its answers (status lines, error texts, bodies, output);
// bounding it where it enters keeps one target from making events, the
// store, logs and API responses grow without bound.
const MaxMessageBytes = 10 << 10

// TruncatedSuffix ends a message that BoundMessage shortened.
const TruncatedSuffix = "… (truncated)"

// BoundMessage returns s as valid UTF-8 (each run of invalid bytes
// replaced by U+FFFD) of at most MaxMessageBytes bytes. A longer s is cut
// on a rune boundary and ends with TruncatedSuffix. It never allocates
// more than about MaxMessageBytes, whatever the length of s, and returns s
// itself when it is valid and short enough.
func BoundMessage(s string) string {
	return Bound(s, MaxMessageBytes)
}

// Bound is BoundMessage with a limit of n bytes (n is raised to fit
// TruncatedSuffix when smaller).
func Bound(s string, n int) string {
	n = max(n, len(TruncatedSuffix))
	if len(s) <= n && utf8.ValidString(s) {
		return s
	}
	truncated := len(s) > n
	if truncated {
		// Only the first n bytes can survive; looking at them alone keeps
		// the cost independent of len(s).
		s = s[:n]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !truncated && len(s) <= n {
		return s
	}
	// Replacements may have grown it; cut on a rune boundary so that the
	// suffix fits.
	cut := n - len(TruncatedSuffix)
	if len(s) <= cut {
		return s + TruncatedSuffix
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + TruncatedSuffix
}
