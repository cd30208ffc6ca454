package main

import (
	"bytes"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// flooder is a raw HTTP/2 client that opens streams (HEADERS without a
// body) as fast as it can, the way an attacker parks server goroutines.
type flooder struct {
	conn   net.Conn
	framer *http2.Framer
	frames chan http2.Frame // what the server sent, read by one goroutine
	done   chan struct{}    // closed when the server closed the connection
}

func newFlooder(t *testing.T, addr string) *flooder {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	f := &flooder{conn: c, framer: http2.NewFramer(c, c), frames: make(chan http2.Frame, 1), done: make(chan struct{})}
	if err := f.framer.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	reader := http2.NewFramer(nil, c)
	go func() {
		defer close(f.done)
		for {
			fr, err := reader.ReadFrame()
			if err != nil {
				return
			}
			if p, ok := fr.(*http2.PingFrame); ok && p.IsAck() {
				select {
				case f.frames <- p:
				case <-time.After(30 * time.Second):
					return
				}
			}
			if r, ok := fr.(*http2.RSTStreamFrame); ok && r.ErrCode == http2.ErrCodeRefusedStream {
				select {
				case f.frames <- r:
				case <-time.After(30 * time.Second):
					return
				}
			}
		}
	}()
	return f
}

// open sends n HEADERS frames of unary calls, each on a new stream and
// without END_STREAM: the server waits for a request message that never
// comes. authorization, when not empty, is sent as the header.
func (f *flooder) open(t *testing.T, n int, authorization string) {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: probev1.ProbeService_CreateTarget_FullMethodName},
		{Name: ":authority", Value: "probed"},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
	}
	if authorization != "" {
		fields = append(fields, hpack.HeaderField{Name: "authorization", Value: authorization})
	}
	for i := range n {
		block.Reset()
		for _, hf := range fields {
			if err := enc.WriteField(hf); err != nil {
				t.Fatal(err)
			}
		}
		err := f.framer.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block.Bytes(), EndHeaders: true})
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
}

// sync waits until the server has read everything sent so far: the
// server answers a PING after the frames before it, and starts a
// handler goroutine for a stream before it reads the next frame. It
// returns how many streams the server refused (REFUSED_STREAM) until
// then.
func (f *flooder) sync(t *testing.T) (refused int) {
	t.Helper()
	data := [8]byte{'s', 'y', 'n', 'c'}
	if err := f.framer.WritePing(false, data); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case fr := <-f.frames:
			if _, ok := fr.(*http2.PingFrame); ok {
				return refused
			}
			refused++
		case <-f.done:
			t.Fatal("the server closed the connection before answering the PING")
		case <-time.After(30 * time.Second):
			t.Fatal("no PING acknowledgement within 30s")
		}
	}
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestStreamFloodBeforeAuthenticationIsBounded floods a probed that
// requires tokens with streams whose HEADERS carry no (or a wrong) token
// and which never send a body, on several connections: goroutines and
// heap stay flat, since the token is checked at header time and no handler
// goroutine starts. The connections, never authenticated, are then closed
// by --first-call-timeout (its default, 10s), and a connection that made
// an authenticated call is not. A client with a valid token that does the same
// holds at most --max-streams-per-connection handlers per connection.
// Not parallel: it counts the process's goroutines.
func TestStreamFloodBeforeAuthenticationIsBounded(t *testing.T) {
	const (
		conns   = 8
		streams = 2000 // per connection
	)
	tokens := tokenFile(t, aliceToken+" alice")
	addr := startServer(t, testConfig(t, "--auth-token-file", tokens))

	// Let the server settle (its first connections, timers) before the
	// baseline. authed makes one authenticated call, which admits its
	// connection: it must outlive --first-call-timeout.
	settle := newFlooder(t, addr)
	settle.sync(t)
	authed := newFlooder(t, addr)
	authed.open(t, 1, "Bearer "+aliceToken)
	authed.sync(t)
	baseGoroutines, baseHeap := runtime.NumGoroutine(), heapInUse()

	var floods []*flooder
	for i := range conns {
		f := newFlooder(t, addr)
		auth := ""
		if i%2 == 1 {
			auth = "Bearer " + bobToken // not in the token file
		}
		f.open(t, streams, auth)
		floods = append(floods, f)
	}
	for _, f := range floods {
		f.sync(t)
	}
	// Each flooding connection: its reader goroutine here, and the
	// server's reader, writer and keepalive goroutines.
	goroutines, heap := runtime.NumGoroutine()-baseGoroutines, int64(heapInUse())-int64(baseHeap)
	t.Logf("%d unauthenticated streams on %d connections: +%d goroutines, %+d KiB heap", conns*streams, conns, goroutines, heap>>10)
	if limit := conns*6 + 50; goroutines > limit {
		t.Errorf("goroutines grew by %d under the flood, want at most %d", goroutines, limit)
	}
	if limit := int64(16 << 20); heap > limit {
		t.Errorf("heap grew by %d KiB under the flood, want at most %d KiB", heap>>10, limit>>10)
	}

	// Never authenticated, the connections are closed by the server.
	for i, f := range append(floods, settle) {
		select {
		case <-f.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("flooding connection %d still open 30s after a --first-call-timeout of %v", i, defaultFirstCallTimeout)
		}
	}

	if authed.sync(t) != 0 {
		t.Error("the authenticated connection's PING was answered with refused streams")
	}

	// A valid token: streams beyond --max-streams-per-connection are
	// refused, and the others hold one handler each.
	f := newFlooder(t, addr)
	f.open(t, 1000, "Bearer "+aliceToken)
	refused := f.sync(t)
	if want := 1000 - defaultMaxStreamsPerConnection; refused != want {
		t.Errorf("%d of 1000 authenticated streams refused, want %d (--max-streams-per-connection %d)", refused, want, defaultMaxStreamsPerConnection)
	}
	if err := f.conn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Error(err)
	}
}
