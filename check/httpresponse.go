package check

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// plainResponse reads the head of a plain response from what br has
// buffered, without http.ReadResponse's header map: an HTTP/1.1 answer
// with a 2xx (but 204), 4xx or 5xx status, a Content-Length and no
// Transfer-Encoding, whose whole head is buffered, every header line
// well formed. Only the headers a probe needs are read: Content-Length
// and Connection. It fills resp (Header nil, Body body, reading
// Content-Length bytes from br), consumes the head and reports true; for
// anything else it consumes nothing and reports false, and the caller
// reads the response with http.ReadResponse, which handles (and refuses)
// the rest exactly as before.
func plainResponse(br *bufio.Reader, resp *http.Response, body *lengthBody) bool {
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		return false
	}
	head := buf[:end+2] // each line with its CRLF
	for i, c := range head {
		if c == '\n' && (i == 0 || head[i-1] != '\r') {
			return false // a line ending in a bare LF, which net/http takes too
		}
	}
	eol := bytes.Index(head, crlf)
	line := head[:eol]
	// "HTTP/1.1 200 OK": the version, one space, three digits, then
	// nothing or a space and the reason.
	if len(line) < 12 || !bytes.HasPrefix(line, http11) || (len(line) > 12 && line[12] != ' ') {
		return false
	}
	code := 0
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return false
		}
		code = code*10 + int(d-'0')
	}
	if (code < 200 || code > 299 || code == http.StatusNoContent) && (code < 400 || code > 599) {
		return false // redirects (Location), 1xx, 204, 304: http.ReadResponse
	}
	length, closing := int64(-1), false
	for rest := head[eol+2:]; len(rest) > 0; {
		eol := bytes.Index(rest, crlf)
		line := rest[:eol]
		rest = rest[eol+2:]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !validName(line[:colon]) || !validValue(line[colon+1:]) {
			return false // folded, malformed, or a byte net/http refuses
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		switch {
		case bytes.EqualFold(name, contentLength):
			n, ok := parseLength(value)
			if length >= 0 || !ok {
				return false
			}
			length = n
		case bytes.EqualFold(name, transferEncoding):
			return false
		case bytes.EqualFold(name, connection):
			// httpguts.HeaderValuesContainsToken: comma-separated tokens.
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				if bytes.EqualFold(bytes.Trim(tok, " \t"), closeToken) {
					closing = true
				}
			}
		}
	}
	if length < 0 {
		return false // a body until the connection closes: http.ReadResponse
	}
	*resp = http.Response{
		Status: statusText(code, line[9:]), StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		ContentLength: length, Close: closing, Body: body,
	}
	*body = lengthBody{r: br, n: length}
	_, _ = br.Discard(end + 4)
	return true
}

var (
	crlf             = []byte("\r\n")
	crlfcrlf         = []byte("\r\n\r\n")
	http11           = []byte("HTTP/1.1 ")
	contentLength    = []byte("Content-Length")
	transferEncoding = []byte("Transfer-Encoding")
	connection       = []byte("Connection")
	closeToken       = []byte("close")
)

// parseLength parses a Content-Length value: 1 to 18 decimal digits.
func parseLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int64(d-'0')
	}
	return n, true
}

// validName reports whether b is a header field name (a token).
func validName(b []byte) bool {
	for _, c := range b {
		if !httpguts.IsTokenRune(rune(c)) {
			return false
		}
	}
	return true
}

// validValue reports whether b holds no control byte but tab, as
// net/http's header reader requires.
func validValue(b []byte) bool {
	for _, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// statusText is resp.Status for code and what follows the version on the
// status line ("200 OK"): a shared string when it is the usual one.
func statusText(code int, status []byte) string {
	if s := usualStatus[code]; s != "" && string(status) == s {
		return s
	}
	return string(status)
}

// usualStatus is "200 OK" and the like, by code.
var usualStatus = func() (s [600]string) {
	for code := range s {
		if t := http.StatusText(code); t != "" {
			s[code] = strconv.Itoa(code) + " " + t
		}
	}
	return s
}()

// plainAnswers are the responses plainResponse fills, returned when their
// exchange is done.
var plainAnswers = sync.Pool{New: func() any { return new(plainAnswer) }}

// plainAnswer is a response read by plainResponse, and its body.
type plainAnswer struct {
	resp http.Response
	body lengthBody
}

// lengthBody reads a body of n bytes from r.
type lengthBody struct {
	r *bufio.Reader
	n int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	k, err := b.r.Read(p)
	b.n -= int64(k)
	if err == io.EOF && b.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return k, err
}

// Close does nothing: the exchange owns the connection.
func (*lengthBody) Close() error { return nil }
