package probe_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/probed/probed/engine/probe"
)

func TestBoundMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", probe.MaxMessageBytes+1)
	tests := []struct {
		name, in, want string
	}{
		{name: "empty", in: "", want: ""},
		{name: "short", in: "HTTP probe failed with statuscode: 503", want: "HTTP probe failed with statuscode: 503"},
		{name: "invalid UTF-8", in: "300 \xf1\xff", want: "300 \uFFFD"},
		{name: "exactly the limit", in: long[1:], want: long[1:]},
		{name: "one byte over", in: long, want: long[:probe.MaxMessageBytes-len(probe.TruncatedSuffix)] + probe.TruncatedSuffix},
		{
			name: "cut inside a rune",
			in:   strings.Repeat("é", probe.MaxMessageBytes),
			want: strings.Repeat("é", (probe.MaxMessageBytes-len(probe.TruncatedSuffix))/2) + probe.TruncatedSuffix,
		},
		{name: "a terminal escape in a reason phrase", in: "HTTP 503 \x1b[2J\x1b]0;pwned\a", want: `HTTP 503 \x1b[2J\x1b]0;pwned\x07`},
		{name: "lines", in: "line 1\r\nline 2\tend", want: `line 1\r\nline 2\tend`},
		{name: "C1 and DEL", in: "a\u009b31mb\x7f", want: `a\u009b31mb\x7f`},
		{name: "a bidirectional override", in: "ok \u202egnp.exe", want: `ok \u202egnp.exe`},
		{name: "backslashes stay", in: `C:\dir\x1b`, want: `C:\dir\x1b`},
		{
			name: "cut before an escape, not inside",
			in:   strings.Repeat("a", probe.MaxMessageBytes-len(probe.TruncatedSuffix)-2) + "\x1b" + strings.Repeat("b", 100),
			want: strings.Repeat("a", probe.MaxMessageBytes-len(probe.TruncatedSuffix)-2) + probe.TruncatedSuffix,
		},
		{
			name: "growing with escapes",
			in:   strings.Repeat("\x00", probe.MaxMessageBytes/2),
			want: strings.Repeat(`\x00`, (probe.MaxMessageBytes-len(probe.TruncatedSuffix))/4) + probe.TruncatedSuffix,
		},
		{
			name: "short but growing with replacements",
			in:   strings.Repeat("a\xff", probe.MaxMessageBytes/2),
			// 10240-15 = 10225 = 2556 × len("a\uFFFD") + 1: the cut keeps an "a".
			want: strings.Repeat("a\uFFFD", 2556) + "a" + probe.TruncatedSuffix,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := probe.BoundMessage(tt.in)
			if got != tt.want {
				t.Errorf("BoundMessage(%d bytes) = %d bytes %q..., want %d bytes", len(tt.in), len(got), clip(got), len(tt.want))
			}
		})
	}
}

func TestBoundMessageOfEightMiB(t *testing.T) { // not parallel: AllocsPerRun
	in := strings.Repeat("x", 8<<20)
	allocs := testing.AllocsPerRun(10, func() { _ = probe.BoundMessage(in) })
	got := probe.BoundMessage(in)
	if len(got) > probe.MaxMessageBytes || !strings.HasSuffix(got, probe.TruncatedSuffix) {
		t.Errorf("BoundMessage(8 MiB) = %d bytes, ends %q", len(got), got[len(got)-20:])
	}
	if allocs > 2 {
		t.Errorf("BoundMessage(8 MiB) allocates %v times", allocs)
	}
}

// FuzzBoundMessage: whatever the input, the result is valid UTF-8 within
// the limit with no control or bidirectional formatting character, and
// it is the (repaired, escaped) input, or a prefix of it marked
// truncated.
func FuzzBoundMessage(f *testing.F) {
	for _, s := range []string{"", "ok", "\xf1\xff", strings.Repeat("é", 6000), strings.Repeat("\xff", 20000),
		"HTTP 503 \x1b[2J", "a\u009bb\u202ec\r\n", strings.Repeat("\x1b", 5000)} {
		f.Add(s, 40)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n % (1 << 16)
		got := probe.Bound(s, n)
		limit := max(n, len(probe.TruncatedSuffix))
		if !utf8.ValidString(got) || len(got) > limit {
			t.Fatalf("Bound(%q, %d) = %q: invalid or too long", s, n, got)
		}
		if i := strings.IndexFunc(got, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }); i >= 0 {
			t.Fatalf("Bound(%q, %d) = %q: a control character at %d", s, n, got, i)
		}
		whole := probe.Escape(strings.ToValidUTF8(s, "\uFFFD"))
		if rest, cut := strings.CutSuffix(got, probe.TruncatedSuffix); cut && got != whole {
			if !strings.HasPrefix(probe.Escape(strings.ToValidUTF8(s[:min(len(s), limit)], "\uFFFD")), rest) {
				t.Fatalf("Bound(%q, %d) = %q is not a prefix of the input", s, n, got)
			}
		} else if got != whole {
			t.Fatalf("Bound(%q, %d) = %q, want %q", s, n, got, whole)
		}
	})
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}
