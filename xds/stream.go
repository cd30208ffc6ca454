package xds

import (
	"context"
	"strconv"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// access is what one identity may read.
type access struct {
	auth Authorizer // nil: everything
	id   string
	// key: equal keys, equal access ("" is everything).
	key string
	// policy is model.policy when key was computed.
	policy uint64
}

func (a *access) allowed(name string) bool {
	return a.auth == nil || a.auth.Allowed(a.id, VerbRead, name)
}

// refreshLocked computes the key again after a change of the policy;
// md.mu held.
func (a *access) refreshLocked(md *model) {
	if a.auth == nil || a.policy == md.policy && a.key != "" {
		return
	}
	a.key, a.policy = "grants:"+a.auth.Grants(a.id), md.policy
}

// xdsStream is one ADS stream: the identity it serves, and the cache
// (go-control-plane's ConfigWatcher) and callbacks of that stream alone,
// so that what it is sent is filtered by that identity.
type xdsStream struct {
	s      *Server
	access *access // guarded by s.model.mu

	mu sync.Mutex
	// node is the node ID the client gave (logs).
	node string
	// sent: a response of the type was sent on the stream (SotW: the
	// first request of a type is always answered).
	sent map[string]bool
	// refreshed is model.refresh when a response of the type was last
	// made.
	refreshed map[string]uint64
}

var _ cache.ConfigWatcher = (*xdsStream)(nil)

// watch is one open request of a stream: go-control-plane opens one per
// type, answered once (then the client's next request opens the next).
type watch struct {
	st       *xdsStream
	typ      string
	wildcard bool
	names    map[string]struct{}
	// returned is what the client holds: name -> hash.
	returned map[string]string
	// first: nothing of this type was sent on the stream yet (SotW).
	first bool
	// refreshed is the refresh period of the last response of the type.
	refreshed uint64
	// minRev: the client saw this revision (the version of its request);
	// it is not answered from an older one, until expiry fires.
	minRev  uint64
	expiry  *time.Timer
	expired bool

	sotwReq  *discovery.DiscoveryRequest
	sotwCh   chan cache.Response
	deltaReq *discovery.DeltaDiscoveryRequest
	deltaCh  chan cache.DeltaResponse
}

// concerns reports whether a change of the services in c may change the
// watch's answer (structural changes concern every watch).
func (w *watch) concerns(c *change) bool {
	switch {
	case w.minRev > 0:
		return true // waits for the revision to move
	case w.typ != EndpointType:
		return false // listeners and clusters move with the structure only
	case w.wildcard:
		return len(c.services) > 0
	}
	for name := range c.services {
		if _, ok := w.names[name]; ok {
			return true
		}
	}
	return false
}

// CreateWatch opens a State of the World watch (go-control-plane calls
// it for every request of the stream).
func (st *xdsStream) CreateWatch(req *cache.Request, sub cache.Subscription, ch chan cache.Response) (func(), error) {
	w := &watch{
		st:       st,
		typ:      req.GetTypeUrl(),
		wildcard: sub.IsWildcard(),
		names:    sub.SubscribedResources(),
		returned: sub.ReturnedResources(),
		sotwReq:  req,
		sotwCh:   ch,
	}
	st.mu.Lock()
	w.first = !st.sent[w.typ]
	w.refreshed = st.refreshed[w.typ]
	st.mu.Unlock()
	if v, err := strconv.ParseUint(req.GetVersionInfo(), 10, 64); err == nil && w.first {
		// A client that reconnects (to this probed restarted, or to
		// another replica) is not answered from before what it saw.
		w.minRev = v
	}
	return st.s.open(w), nil
}

// CreateDeltaWatch opens an incremental watch.
func (st *xdsStream) CreateDeltaWatch(req *cache.DeltaRequest, sub cache.Subscription, ch chan cache.DeltaResponse) (func(), error) {
	w := &watch{
		st:       st,
		typ:      req.GetTypeUrl(),
		wildcard: sub.IsWildcard(),
		names:    sub.SubscribedResources(),
		returned: sub.ReturnedResources(),
		deltaReq: req,
		deltaCh:  ch,
	}
	st.mu.Lock()
	w.refreshed = st.refreshed[w.typ]
	st.mu.Unlock()
	return st.s.open(w), nil
}

// open registers w with the model and returns its cancel function.
func (s *Server) open(w *watch) func() {
	md := s.model
	md.mu.Lock()
	defer md.mu.Unlock()
	if w.minRev > md.rev || !md.loaded {
		w.expiry = time.AfterFunc(s.opts.CatchUpWait, func() {
			md.mu.Lock()
			defer md.mu.Unlock()
			if _, open := md.watches[w]; open {
				w.expired = true
				if md.evaluateLocked(w) {
					md.dropLocked(w)
				}
			}
		})
	}
	md.addLocked(w)
	return func() {
		md.mu.Lock()
		defer md.mu.Unlock()
		md.dropLocked(w)
	}
}

// evaluateLocked answers w if the model has something for it; it reports
// whether it did (the watch is then done). md.mu held.
func (md *model) evaluateLocked(w *watch) bool {
	if !md.loaded || (w.minRev > md.rev && !w.expired) {
		return false
	}
	w.st.access.refreshLocked(md)
	rs := md.resourcesLocked(w)
	refresh := w.typ == EndpointType && w.refreshed < md.refresh
	if w.deltaReq != nil {
		return md.answerDeltaLocked(w, rs, refresh)
	}
	var send []resource
	switch {
	case w.typ != EndpointType:
		// Listeners and clusters: every response holds all of them (a
		// subscribed one missing is deleted).
		if !w.first && sameKeys(w.returned, rs) {
			return false
		}
		send = rs
	default:
		// Endpoints: only what changed (a missing one is unchanged).
		for _, r := range rs {
			if refresh || w.returned[r.name] != r.hash {
				send = append(send, r)
			}
		}
		if !w.first && len(send) == 0 {
			return false
		}
	}
	resp := &discovery.DiscoveryResponse{VersionInfo: version(md.rev), TypeUrl: w.typ, Resources: make([]*anypb.Any, len(send))}
	for i, r := range send {
		resp.Resources[i] = r.any
	}
	w.st.made(w.typ, md.refresh)
	select {
	case w.sotwCh <- &cache.PassthroughResponse{Request: w.sotwReq, DiscoveryResponse: resp, ReturnedResources: returnedOf(rs)}:
	default:
		// go-control-plane reads each watch's one answer from a channel
		// of one: never full.
		md.opts.Logger.Error("xds: a watch was answered twice", "type", w.typ)
	}
	return true
}

// answerDeltaLocked answers an incremental watch with what changed and
// what was removed, if anything.
func (md *model) answerDeltaLocked(w *watch, rs []resource, refresh bool) bool {
	var send []*discovery.Resource
	next := returnedOf(rs)
	for _, r := range rs {
		if refresh || w.returned[r.name] != r.hash {
			send = append(send, &discovery.Resource{Name: r.name, Version: r.hash, Resource: r.any})
		}
	}
	var removed []string
	for name, v := range w.returned {
		if _, ok := next[name]; !ok && v != "" {
			removed = append(removed, name)
		}
	}
	if len(send) == 0 && len(removed) == 0 {
		return false
	}
	resp := &discovery.DeltaDiscoveryResponse{SystemVersionInfo: version(md.rev), TypeUrl: w.typ, Resources: send, RemovedResources: removed}
	w.st.made(w.typ, md.refresh)
	select {
	case w.deltaCh <- &cache.DeltaPassthroughResponse{DeltaRequest: w.deltaReq, DeltaDiscoveryResponse: resp, NextVersionMap: next}:
	default:
		md.opts.Logger.Error("xds: the responses of a delta stream are not being read", "type", w.typ)
		return false
	}
	return true
}

// made records that a response of typ was made in refresh period rev.
func (st *xdsStream) made(typ string, refresh uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.refreshed[typ] = refresh
}

// OnStreamOpen implements sotw.Callbacks.
func (st *xdsStream) OnStreamOpen(context.Context, int64, string) error { return nil }

// OnStreamClosed implements sotw.Callbacks.
func (st *xdsStream) OnStreamClosed(int64, *corev3.Node) {}

// OnStreamRequest implements sotw.Callbacks: it counts ACKs and NACKs,
// and logs the NACKs (the client kept its previous resources).
func (st *xdsStream) OnStreamRequest(_ int64, req *discovery.DiscoveryRequest) error {
	st.request(req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetVersionInfo(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	return nil
}

// OnStreamResponse implements sotw.Callbacks: the response is being sent.
func (st *xdsStream) OnStreamResponse(_ context.Context, _ int64, req *discovery.DiscoveryRequest, resp *discovery.DiscoveryResponse) {
	st.mu.Lock()
	st.sent[req.GetTypeUrl()] = true
	st.mu.Unlock()
	st.s.stats.push(req.GetTypeUrl(), proto.Size(resp))
}

// OnDeltaStreamOpen implements delta.Callbacks.
func (st *xdsStream) OnDeltaStreamOpen(context.Context, int64, string) error { return nil }

// OnDeltaStreamClosed implements delta.Callbacks.
func (st *xdsStream) OnDeltaStreamClosed(int64, *corev3.Node) {}

// OnStreamDeltaRequest implements delta.Callbacks.
func (st *xdsStream) OnStreamDeltaRequest(_ int64, req *discovery.DeltaDiscoveryRequest) error {
	st.request(req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), "", req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	return nil
}

// OnStreamDeltaResponse implements delta.Callbacks.
func (st *xdsStream) OnStreamDeltaResponse(_ int64, req *discovery.DeltaDiscoveryRequest, resp *discovery.DeltaDiscoveryResponse) {
	st.s.stats.push(req.GetTypeUrl(), proto.Size(resp))
}

// request records a request: the node that sent it, and an ACK or NACK.
func (st *xdsStream) request(node *corev3.Node, typ, nonce, version, nack string, nacked bool) {
	st.mu.Lock()
	if node.GetId() != "" {
		st.node = node.GetId()
	}
	id := st.node
	st.mu.Unlock()
	switch {
	case nacked:
		st.s.stats.nacks.Add(1)
		st.s.opts.Logger.Warn("xds: a client rejected a response (NACK); it keeps what it had", "node", id, "identity", st.access.id, "type", typ, "version", version, "error", nack)
	case nonce != "":
		st.s.stats.acks.Add(1)
	}
}

// The subscription type go-control-plane hands to the cache.
var _ cache.Subscription = (*stream.Subscription)(nil)
