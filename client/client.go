// Package client is the Go client of probed: typed calls for every RPC of
// probe.v1.ProbeService, a Watch that reconnects and resumes by revision,
// and WaitReady, which holds a caller until a target is ready.
//
// Targets, probes and events are the API's generated types, package
// probev1, import path "github.com/probed/probed/proto/probe/v1".
// ProbeDuration turns a time.Duration into a probe's seconds and
// milliseconds fields:
//
//	import (
//		"github.com/probed/probed/client"
//		probev1 "github.com/probed/probed/proto/probe/v1"
//	)
//
//	c, err := client.Dial(ctx, "127.0.0.1:50051")
//	...
//	p := &probev1.Probe{Handler: &probev1.Probe_TcpSocket{
//		TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: 8080},
//	}}
//	p.PeriodSeconds, p.PeriodMilliseconds = client.ProbeDuration(100 * time.Millisecond)
//	_, err = c.Create(ctx, &probev1.Target{Name: "web", ReadinessProbe: p})
//	...
//	web, err := c.WaitReady(ctx, "web")
//
// Errors returned by calls wrap one of the sentinels (ErrNotFound,
// ErrInvalid, ...) and keep the gRPC status; an invalid request is an
// *InvalidError listing every field violation.
//
// The module, github.com/probed/probed, is not published where go get
// can fetch it: depend on a clone of its repository with a replace
// directive (probed's README, "The Go client", shows how).
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Client calls a probed server. It is safe for concurrent use.
type Client struct {
	svc   probev1.ProbeServiceClient
	close func() error // nil when the caller owns the connection
}

// New returns a client over conn, which the caller keeps owning: Close
// does not close it.
func New(conn grpc.ClientConnInterface) *Client {
	return &Client{svc: probev1.NewProbeServiceClient(conn)}
}

// Dial returns a client of the probed at addr (a gRPC target such as
// "127.0.0.1:50051" or "dns:///probed.example:50051"), or of the replicas
// of a cluster at a comma-separated list of host:port ("10.0.0.1:50051,
// 10.0.0.2:50051"): calls are spread over the replicas that answer, and a
// Watch whose replica goes away resumes on another (any replica serves
// every target; with TLS, each replica's certificate is checked against its
// own host). The connection is
// made lazily by the first call (grpc.NewClient), so an unreachable server
// shows up as ErrUnavailable from the calls, not here; ctx is checked
// only. Without a TLS option the connection is plaintext. A lost
// connection is redialled with an exponential backoff capped at
// DefaultMaxBackoff (WithDialOptions(grpc.WithConnectParams(...))
// replaces it). The caller must Close the client.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var o dialOptions
	for _, opt := range opts {
		opt(&o)
	}
	gopts, err := o.grpcOptions(addr)
	if err != nil {
		return nil, err
	}
	target := addr
	if addrs := strings.Split(addr, ","); len(addrs) > 1 {
		// Several replicas of a cluster: calls are spread over those that
		// answer, and a watch resumes on another one when its replica goes.
		r := manual.NewBuilderWithScheme("probed")
		state := resolver.State{}
		for _, a := range addrs {
			a = strings.TrimSpace(a)
			host, _, err := net.SplitHostPort(a)
			if err != nil {
				return nil, fmt.Errorf("client: replica address %q: %w", a, err)
			}
			// TLS checks each replica's certificate against its own host.
			state.Endpoints = append(state.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a, ServerName: host}}})
		}
		r.InitialState(state)
		gopts = append(gopts, grpc.WithResolvers(r), grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))
		target = r.Scheme() + ":///replicas"
	}
	conn, err := grpc.NewClient(target, gopts...)
	if err != nil {
		return nil, err
	}
	c := New(conn)
	c.close = conn.Close
	return c, nil
}

// Close closes the connection Dial made; for a client made by New it does
// nothing. Calls in flight fail, and watches end.
func (c *Client) Close() error {
	if c.close == nil {
		return nil
	}
	return c.close()
}

// Create registers a target and returns it with its status. A name in use
// is ErrAlreadyExists; an invalid spec is an *InvalidError.
func (c *Client) Create(ctx context.Context, t *probev1.Target) (*probev1.Target, error) {
	resp, err := c.svc.CreateTarget(ctx, &probev1.CreateTargetRequest{Target: t})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.GetTarget(), nil
}

// Get returns a target with its current status, or ErrNotFound.
func (c *Client) Get(ctx context.Context, name string) (*probev1.Target, error) {
	resp, err := c.svc.GetTarget(ctx, &probev1.GetTargetRequest{Name: name})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.GetTarget(), nil
}

// ListOptions select one page of List.
type ListOptions struct {
	// PageSize is the most targets returned; 0 means the server's default
	// (100); the server caps it at 1000.
	PageSize int32
	// PageToken is the next page token of the previous page; "" for the
	// first page.
	PageToken string
	// Labels, when not empty, selects the targets whose labels include all
	// of them.
	Labels map[string]string
	// Namespace, when set, selects the targets of that namespace (names
	// "NAMESPACE/...").
	Namespace string
}

// List returns one page of targets in name order and the token of the
// next page, "" on the last page.
func (c *Client) List(ctx context.Context, opts ListOptions) (targets []*probev1.Target, nextPageToken string, err error) {
	resp, err := c.svc.ListTargets(ctx, &probev1.ListTargetsRequest{
		PageSize:      opts.PageSize,
		PageToken:     opts.PageToken,
		LabelSelector: opts.Labels,
		Namespace:     opts.Namespace,
	})
	if err != nil {
		return nil, "", fromStatus(err)
	}
	return resp.GetTargets(), resp.GetNextPageToken(), nil
}

// ListAll returns every target whose labels include labels (all targets
// when labels is empty), in name order, following the pages. Pages are
// separate reads: a target created or deleted meanwhile may be missed or
// listed as it was.
func (c *Client) ListAll(ctx context.Context, labels map[string]string) ([]*probev1.Target, error) {
	return c.ListAllOf(ctx, ListOptions{Labels: labels})
}

// ListAllOf is ListAll of the targets opts selects (its Labels and
// Namespace; its page fields are ignored).
func (c *Client) ListAllOf(ctx context.Context, opts ListOptions) ([]*probev1.Target, error) {
	var all []*probev1.Target
	opts.PageSize, opts.PageToken = 1000, ""
	for {
		page, next, err := c.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		opts.PageToken = next
	}
}

// Update replaces the spec of an existing target (ErrNotFound otherwise),
// keeping the state of the probes that still exist.
func (c *Client) Update(ctx context.Context, t *probev1.Target) (*probev1.Target, error) {
	resp, err := c.svc.UpdateTarget(ctx, &probev1.UpdateTargetRequest{Target: t})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.GetTarget(), nil
}

// applyAttempts bounds Apply's create/update round trips when the target
// keeps being created and deleted concurrently.
const applyAttempts = 3

// Apply creates t, or updates it when a target by its name exists.
// created reports which happened.
func (c *Client) Apply(ctx context.Context, t *probev1.Target) (applied *probev1.Target, created bool, err error) {
	for range applyAttempts {
		applied, err = c.Create(ctx, t)
		if !errors.Is(err, ErrAlreadyExists) {
			return applied, err == nil, err
		}
		applied, err = c.Update(ctx, t)
		if !errors.Is(err, ErrNotFound) {
			return applied, false, err
		}
		// Deleted between the two calls: create it again.
	}
	return nil, false, err
}

// Delete starts the graceful removal of a target and returns it as
// TERMINATING; its removal is a later DELETED event. GracePeriod
// shortens the wait (GracePeriod(0) removes the target at once), also of
// a target already terminating.
func (c *Client) Delete(ctx context.Context, name string, opts ...DeleteOption) (*probev1.Target, error) {
	req := &probev1.DeleteTargetRequest{Name: name}
	for _, o := range opts {
		o(req)
	}
	resp, err := c.svc.DeleteTarget(ctx, req)
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.GetTarget(), nil
}

// DeleteOption changes one Delete.
type DeleteOption func(*probev1.DeleteTargetRequest)

// GracePeriod overrides the target's termination grace period for this
// deletion, in seconds, as `kubectl delete --grace-period` does: the
// preStop sleep is cut to it; 0 removes the target at once.
func GracePeriod(seconds int64) DeleteOption {
	return func(r *probev1.DeleteTargetRequest) { r.GracePeriodSeconds = &seconds }
}

// Trigger runs one probe of a target now and returns its outcome and the
// probe's status after it. A target without that probe is ErrNotFound.
func (c *Client) Trigger(ctx context.Context, name string, probe probev1.ProbeType) (*probev1.TriggerProbeResponse, error) {
	resp, err := c.svc.TriggerProbe(ctx, &probev1.TriggerProbeRequest{Name: name, ProbeType: probe})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp, nil
}

// Replicas lists the replicas of a cluster (probed --store=etcd) with the
// shards each probes; a single probed is one replica.
func (c *Client) Replicas(ctx context.Context) (*probev1.ListReplicasResponse, error) {
	resp, err := c.svc.ListReplicas(ctx, &probev1.ListReplicasRequest{})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp, nil
}

// Reset tells the engine that the target restarted: its probes return to
// their initial state and the startup probe runs again.
func (c *Client) Reset(ctx context.Context, name string) (*probev1.Target, error) {
	resp, err := c.svc.ResetTarget(ctx, &probev1.ResetTargetRequest{Name: name})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.GetTarget(), nil
}
