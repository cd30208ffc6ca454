package main

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestOneClientCannotTakeEveryWatchSlot: one identity opened 1,000 Watch
// streams on one connection, and every other client's Watch then got
// ResourceExhausted and the status page 429. With
// --max-watchers-per-client, alice holds at most her share of the slots
// (her Watch streams and status-page event streams together), and bob
// still gets both.
func TestOneClientCannotTakeEveryWatchSlot(t *testing.T) {
	t.Parallel()
	const maxWatchers, perClient = 10, 4
	tokens := tokenFile(t, aliceToken+" alice", bobToken+" bob")
	ui := refused.Reserve(t).Addr()
	addr := startServer(t, testConfig(t, "--auth-token-file", tokens, "--ui-addr", ui,
		"--max-watchers", "10", "--max-watchers-per-client", "4"))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	svc := probev1.NewProbeServiceClient(conn)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	// watch opens a Watch and returns the status of its first message;
	// the stream stays open until the test ends.
	watch := func(tok string) *status.Status {
		s, err := svc.Watch(withToken(ctx, tok), &probev1.WatchRequest{})
		if err != nil {
			return status.Convert(err)
		}
		_, err = s.Recv()
		return status.Convert(err)
	}
	// events opens the status page's event stream and returns its HTTP
	// status, having read up to its recent past when it is 200; the
	// stream stays open until the test ends.
	events := func(tok string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ui+"/api/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		if resp.StatusCode == http.StatusOK {
			r := bufio.NewReader(resp.Body)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					t.Fatalf("the event stream ended before its recent past: %v", err)
				}
				if line == "event: recent\n" {
					break
				}
			}
		}
		return resp.StatusCode
	}

	// alice tries to take every slot: Watch streams, then a status-page
	// stream in her last slot, then more of both.
	held := 0
	for range perClient - 1 {
		if st := watch(aliceToken); st.Code() != codes.OK {
			t.Fatalf("alice's Watch within her share: %v", st.Err())
		}
		held++
	}
	if code := events(aliceToken); code != http.StatusOK {
		t.Fatalf("alice's event stream in her last slot: %d, want 200", code)
	}
	held++
	for range maxWatchers {
		st := watch(aliceToken)
		if st.Code() == codes.OK {
			held++
			continue
		}
		if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--max-watchers-per-client") {
			t.Fatalf("alice's Watch beyond her share: %v, want ResourceExhausted naming --max-watchers-per-client", st.Err())
		}
	}
	if held != perClient {
		t.Errorf("alice holds %d of %d watcher slots, want %d (--max-watchers-per-client)", held, maxWatchers, perClient)
	}
	if code := events(aliceToken); code != http.StatusTooManyRequests {
		t.Errorf("alice's event stream beyond her share: %d, want 429", code)
	}
	if st := watch(bobToken); st.Code() != codes.OK {
		t.Errorf("bob's Watch while alice holds her share: %v", st.Err())
	}
	if code := events(bobToken); code != http.StatusOK {
		t.Errorf("bob's event stream while alice holds her share: %d, want 200", code)
	}
}
