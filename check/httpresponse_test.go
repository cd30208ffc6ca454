package check

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// plainCases are responses plainResponse reads itself (plain) or leaves
// to http.ReadResponse.
var plainCases = []struct {
	name  string
	raw   string
	plain bool
}{
	{name: "ok", raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", plain: true},
	{name: "headers of every kind", raw: "HTTP/1.1 200 OK\r\nDate: Mon\r\nContent-Type: text/plain; charset=utf-8\r\nX-Empty:\r\ncontent-length:  5 \r\n\r\nhello", plain: true},
	{name: "no reason", raw: "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", plain: true},
	{name: "own reason", raw: "HTTP/1.1 503 Not Now\r\nContent-Length: 4\r\n\r\nbusy", plain: true},
	{name: "connection close", raw: "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok", plain: true},
	{name: "close among words is not a token", raw: "HTTP/1.1 200 OK\r\nConnection: x close\r\nContent-Length: 2\r\n\r\nok", plain: true},
	{name: "closed is not close", raw: "HTTP/1.1 200 OK\r\nConnection: closed;x\r\nConnection: y\r\nContent-Length: 2\r\n\r\nok", plain: true},
	{name: "body beyond the head's buffer", raw: "HTTP/1.1 200 OK\r\nContent-Length: 6000\r\n\r\n" + strings.Repeat("b", 6000), plain: true},
	{name: "redirect", raw: "HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n"},
	{name: "no content", raw: "HTTP/1.1 204 No Content\r\n\r\n"},
	{name: "continue", raw: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "chunked", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
	{name: "until close", raw: "HTTP/1.1 200 OK\r\n\r\nok"},
	{name: "HTTP/1.0", raw: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "two lengths", raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"},
	{name: "signed length", raw: "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"},
	{name: "folded header", raw: "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok"},
	{name: "space in a name", raw: "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok"},
	{name: "control byte in a value", raw: "HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 2\r\n\r\nok"},
	{name: "bad status", raw: "HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "bare LF", raw: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok"},
	{name: "head not buffered yet", raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"},
}

// TestPlainResponseAsNetHTTP: what plainResponse reads, it reads as
// http.ReadResponse does (status, code, length, Close, body), and it
// leaves what it does not read untouched for http.ReadResponse.
func TestPlainResponseAsNetHTTP(t *testing.T) {
	t.Parallel()
	for _, tt := range plainCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			comparePlain(t, tt.raw, tt.plain)
		})
	}
}

// comparePlain checks plainResponse against http.ReadResponse on raw;
// want, when not nil, is whether plainResponse must read it.
func comparePlain(t *testing.T, raw string, want bool) {
	t.Helper()
	br := bufio.NewReaderSize(strings.NewReader(raw), readBufferSize)
	_, _ = br.Peek(1) // as exchange does: the first read fills the buffer
	var a plainAnswer
	got := plainResponse(br, &a.resp, &a.body)
	if got != want {
		t.Fatalf("plainResponse(%q) = %v; want %v", raw, got, want)
	}
	ref, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), getRequest)
	if !got {
		rest, _ := io.ReadAll(br)
		if string(rest) != raw {
			t.Fatalf("plainResponse consumed input it did not read: left %q", rest)
		}
		return
	}
	if err != nil {
		t.Fatalf("plainResponse read %q, which http.ReadResponse refuses: %v", raw, err)
	}
	body, _ := io.ReadAll(&a.body)
	refBody, _ := io.ReadAll(ref.Body)
	if a.resp.StatusCode != ref.StatusCode || a.resp.Status != ref.Status || a.resp.ContentLength != ref.ContentLength ||
		a.resp.Close != ref.Close || string(body) != string(refBody) {
		t.Errorf("plainResponse: %d %q length %d close %v body %q; http.ReadResponse: %d %q length %d close %v body %q",
			a.resp.StatusCode, a.resp.Status, a.resp.ContentLength, a.resp.Close, body,
			ref.StatusCode, ref.Status, ref.ContentLength, ref.Close, refBody)
	}
}

// FuzzPlainResponse: plainResponse never reads a response differently
// from http.ReadResponse, nor one it refuses.
func FuzzPlainResponse(f *testing.F) {
	for _, tt := range plainCases {
		f.Add(tt.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		br := bufio.NewReaderSize(strings.NewReader(raw), readBufferSize)
		_, _ = br.Peek(1)
		var a plainAnswer
		if !plainResponse(br, &a.resp, &a.body) {
			return
		}
		comparePlain(t, raw, true)
	})
}
