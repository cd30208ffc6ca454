package check

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// grpcChannels are the gRPC channels the checkers of a Set share: one per
// address and TLS settings, opened by the first checker of that key and
// closed when its last checker closes. A channel adds nothing to what
// grpc-go runs for it: while its connection is up, grpc-go's reader and
// writer goroutines; while idle (grpc-go's idle timeout, or before the
// first check), none.
type grpcChannels struct {
	mu    sync.Mutex
	byKey map[string]*grpcChannel // guarded by mu
}

// grpcChannel is one shared channel and the checkers holding it.
type grpcChannel struct {
	key  string
	open func() (*grpc.ClientConn, error) // a new channel for key, nothing dialed yet
	refs int                              // checkers holding it; guarded by grpcChannels.mu
	// conn is the channel checks use; guarded by grpcChannels.mu. It is
	// replaced when it has failed to connect (see conn).
	conn   *grpc.ClientConn
	health healthpb.HealthClient // of conn; guarded by grpcChannels.mu
}

// acquire returns the channel of key, opening it with open when no
// checker holds one; the caller releases it once.
func (s *grpcChannels) acquire(key string, open func() (*grpc.ClientConn, error)) (*grpcChannel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.byKey[key]; ok {
		ch.refs++
		return ch, nil
	}
	conn, err := open()
	if err != nil {
		return nil, err
	}
	ch := &grpcChannel{key: key, open: open, refs: 1, conn: conn, health: healthpb.NewHealthClient(conn)}
	if s.byKey == nil {
		s.byKey = make(map[string]*grpcChannel)
	}
	s.byKey[key] = ch
	return ch, nil
}

// release drops a checker's hold on ch; the last one closes the channel.
func (s *grpcChannels) release(ch *grpcChannel) {
	s.mu.Lock()
	ch.refs--
	last := ch.refs == 0
	conn := ch.conn
	if last {
		delete(s.byKey, ch.key)
		ch.conn, ch.health = nil, nil
	}
	s.mu.Unlock()
	if last && conn != nil {
		_ = conn.Close()
	}
}

// client returns the channel a check uses now. A channel in
// TRANSIENT_FAILURE is replaced by a new one, so that the check dials
// again at once rather than failing with the last error until grpc-go's
// reconnect backoff (up to two minutes) has passed; a check on the new
// channel waits while its connection is being established, and fails as
// soon as it cannot be.
func (s *grpcChannels) client(ch *grpcChannel) (healthpb.HealthClient, *grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch.conn != nil {
		if st := ch.conn.GetState(); st != connectivity.TransientFailure && st != connectivity.Shutdown {
			return ch.health, ch.conn, nil
		}
		old := ch.conn
		// Close does not block on the network; calls still on old end
		// with Canceled, and would have failed with its error anyway.
		defer func() { _ = old.Close() }()
	}
	conn, err := ch.open()
	if err != nil {
		ch.conn, ch.health = nil, nil
		return nil, nil, err
	}
	ch.conn, ch.health = conn, healthpb.NewHealthClient(conn)
	return ch.health, conn, nil
}

// failed is told that a check on conn failed with err: a channel that
// cannot connect is closed, so that nothing redials in the background
// until the next check (which opens a new one). "Cannot connect" is an
// Unavailable error on a channel that is not READY. The channel's state
// alone does not tell: grpc-go hands the failing picker to waiting calls
// before it publishes TRANSIENT_FAILURE, so a call may fail with the
// connection's error while GetState still says CONNECTING. A check that
// ran out of time while a connection was being established keeps it.
func (s *grpcChannels) failed(ch *grpcChannel, conn *grpc.ClientConn, err error) {
	if status.Code(err) != codes.Unavailable || conn.GetState() == connectivity.Ready {
		return // an answer from the server, or a deadline while connecting: keep it
	}
	s.mu.Lock()
	drop := ch.conn == conn
	if drop {
		ch.conn, ch.health = nil, nil
	}
	s.mu.Unlock()
	if drop {
		_ = conn.Close()
	}
}
