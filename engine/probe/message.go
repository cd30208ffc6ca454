package probe

import (
	"strings"
	"unicode"
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
// replaced by U+FFFD), its control characters escaped (Escape), of at
// most MaxMessageBytes bytes. A longer s is cut on a rune boundary, never
// inside an escape, and ends with TruncatedSuffix. It never allocates
// more than about MaxMessageBytes, whatever the length of s, and returns s
// itself when it is valid, printable and short enough.
//
// Every probe message passes through it where it enters the engine
// (Engine's check, and restore for what older versions stored): the text
// a target answers (a reason phrase, a body, a gRPC status message,
// exec output, an error quoting them) reaches pod conditions, logs,
// terminals and the status page, where a terminal escape sequence or a
// bidirectional override would act rather than show.
func BoundMessage(s string) string {
	return Bound(s, MaxMessageBytes)
}

// Bound is BoundMessage with a limit of n bytes (n is raised to fit
// TruncatedSuffix when smaller).
func Bound(s string, n int) string {
	n = max(n, len(TruncatedSuffix))
	if len(s) <= n && utf8.ValidString(s) && printable(s) {
		return s
	}
	truncated := len(s) > n
	if truncated {
		// Only the first n bytes can survive (escaping only grows);
		// looking at them alone keeps the cost independent of len(s).
		s = s[:n]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	cut := n - len(TruncatedSuffix)
	if printable(s) {
		if !truncated && len(s) <= n {
			return s
		}
		// Replacements may have grown it; cut on a rune boundary so that
		// the suffix fits.
		if len(s) <= cut {
			return s + TruncatedSuffix
		}
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + TruncatedSuffix
	}
	var b strings.Builder
	b.Grow(min(2*len(s), n+8))
	kept := -1 // b's length before the first piece that passes cut
	for _, r := range s {
		if kept < 0 && b.Len()+escapedLen(r) > cut {
			kept = b.Len()
		}
		writeEscaped(&b, r)
		if b.Len() > n {
			truncated = true
			break
		}
	}
	out := b.String()
	if !truncated {
		return out
	}
	if kept < 0 {
		kept = len(out)
	}
	return out[:kept] + TruncatedSuffix
}

// Escape returns s with every control character (C0, DEL, C1) and
// bidirectional formatting character written as a Go escape: "\n",
// "\t", "\r", "\x1b", "\u0085", "\u202e". Other text, backslashes
// included, is left as it is: the result shows what a target sent
// without acting on a terminal or reordering a line, and is not meant to
// be unescaped.
func Escape(s string) string {
	if printable(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		writeEscaped(&b, r)
	}
	return b.String()
}

// printable reports whether s has no rune Escape changes.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= utf8.RuneSelf {
			return !strings.ContainsFunc(s[i:], escaped)
		}
	}
	return true
}

// escaped reports whether Escape writes r as an escape.
func escaped(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// writeEscaped writes r to b as Escape does.
func writeEscaped(b *strings.Builder, r rune) {
	if !escaped(r) {
		b.WriteRune(r)
		return
	}
	const hex = "0123456789abcdef"
	switch {
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\r':
		b.WriteString(`\r`)
	case r == '\t':
		b.WriteString(`\t`)
	case r < utf8.RuneSelf:
		b.WriteString(`\x`)
		b.WriteByte(hex[r>>4])
		b.WriteByte(hex[r&0xf])
	default:
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[(r>>shift)&0xf])
		}
	}
}

// escapedLen is the length of r as Escape writes it.
func escapedLen(r rune) int {
	switch {
	case !escaped(r):
		return utf8.RuneLen(r)
	case r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < utf8.RuneSelf:
		return 4
	}
	return 6
}
