package xds

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/probed/probed/engine"
)

// model is the engine's targets as services and endpoints, at one
// revision of the event log, and the watches of the xDS streams waiting
// for it to change. mu guards every field but the immutable ones.
type model struct {
	opts *Options // immutable

	mu sync.Mutex
	// loaded: the first snapshot of the engine is in; until then no
	// watch is answered (a partial set would delete what is missing).
	loaded bool
	// rev is the revision of the event log the model is at: every
	// response's version.
	rev      uint64
	targets  map[string]member
	services map[string]*service
	// excluded counts the targets naming a service that are left out of
	// it, by reason.
	excluded map[string]int
	// policy counts the changes of the authorization policy: an access
	// computed at another count is computed again.
	policy uint64
	// refresh counts the periods of Options.EndpointStaleAfter / 3: an
	// endpoints watch of an older period answers even with no change.
	refresh uint64
	watches map[*watch]struct{}
}

// service is one service: its members (every target naming it, endpoints
// or not) and what was built of it.
type service struct {
	name    string
	members map[string]member // by target name
	lds     resource
	cds     resource
	// views are the service as each access sees it, built on demand;
	// dropped at every change of the service or of the policy.
	views map[string]*view
}

// view is a service as one access (an identity's grants) sees it.
type view struct {
	// visible: at least one member may be read. A service none of whose
	// members may be read does not exist for that access.
	visible   bool
	eds       resource
	endpoints int
}

func newModel(opts *Options) *model {
	return &model{
		opts:     opts,
		targets:  make(map[string]member),
		services: make(map[string]*service),
		excluded: make(map[string]int),
		watches:  make(map[*watch]struct{}),
	}
}

// change collects what a batch of events changed.
type change struct {
	services   map[string]struct{} // services whose members changed in any way
	structural bool                // a service gained or lost a member (so may appear or vanish)
}

func (c *change) touch(svc string) {
	if c.services == nil {
		c.services = make(map[string]struct{})
	}
	c.services[svc] = struct{}{}
}

// setLocked makes m the member of the target name, or removes the
// target when !present, recording what changed.
func (md *model) setLocked(name string, m member, present bool, c *change) {
	if !present {
		m = member{}
	}
	old, had := md.targets[name]
	if had == present && old == m {
		return
	}
	if had && old.reason != "" {
		if md.excluded[old.reason]--; md.excluded[old.reason] == 0 {
			delete(md.excluded, old.reason)
		}
	}
	if m.reason != "" {
		md.excluded[m.reason]++
		if !had || old.reason != m.reason {
			md.opts.Logger.Info("xds: target left out of its service", "target", name, "service", m.service, "reason", m.reason)
		}
	}
	// Kept: a member of a service, or a target left out (counted).
	keep := present && (m.service != "" || m.reason != "")
	if had && old.service != "" && (!keep || old.service != m.service) {
		svc := md.services[old.service]
		delete(svc.members, name)
		svc.views = nil
		c.touch(old.service)
		c.structural = true
		if len(svc.members) == 0 {
			delete(md.services, old.service)
		}
	}
	if !keep {
		delete(md.targets, name)
		return
	}
	md.targets[name] = m
	if m.service == "" {
		return
	}
	svc := md.services[m.service]
	if svc == nil {
		svc = &service{
			name:    m.service,
			members: make(map[string]member),
			lds:     marshal(m.service, listener(m.service)),
			cds:     marshal(m.service, cluster(m.service)),
		}
		md.services[m.service] = svc
	}
	if _, ok := svc.members[name]; !ok {
		c.structural = true
	}
	svc.members[name] = m
	svc.views = nil
	c.touch(m.service)
}

// applyLocked applies one event.
func (md *model) applyLocked(ev *engine.Event, c *change) {
	switch {
	case ev.Kind == engine.KindDeleted:
		md.setLocked(ev.Name, member{}, false, c)
	case ev.Target != nil:
		md.setLocked(ev.Name, memberOf(ev.Target), true, c)
	default:
		// A probe's transition: the spec, and so the address, is as it
		// was; only readiness moved.
		m, ok := md.targets[ev.Name]
		if !ok {
			return
		}
		m.ready = ev.Ready
		md.setLocked(ev.Name, m, true, c)
	}
}

// replaceLocked makes the model the state of a snapshot at rev: every
// service counts as changed, and the watches compare contents, so a
// client sees only what differs.
func (md *model) replaceLocked(targets map[string]*engine.Target, rev uint64) {
	var c change
	for name := range md.targets {
		if _, ok := targets[name]; !ok {
			md.setLocked(name, member{}, false, &c)
		}
	}
	for name, t := range targets {
		md.setLocked(name, memberOf(t), true, &c)
	}
	md.loaded = true
	md.rev = max(md.rev, rev)
	c.structural = true
	md.notifyLocked(&c)
}

// viewLocked returns svc as access a sees it.
func (md *model) viewLocked(svc *service, a *access) *view {
	if v := svc.views[a.key]; v != nil {
		return v
	}
	v := &view{}
	best := make(map[netip.AddrPort]corev3.HealthStatus)
	for name, m := range svc.members {
		if !a.allowed(name) {
			continue
		}
		v.visible = true
		if m.reason != "" {
			continue
		}
		h := md.healthOf(m)
		if h == corev3.HealthStatus_UNKNOWN {
			continue
		}
		// Two targets at one address are one endpoint, as healthy as
		// the healthiest (a terminating target and the ready one that
		// took its address over: the address serves).
		if cur, ok := best[m.addr]; !ok || rank(h) > rank(cur) {
			best[m.addr] = h
		}
	}
	eps := make([]endpoint, 0, len(best))
	for addr, h := range best {
		eps = append(eps, endpoint{addr: addr, health: h})
	}
	v.endpoints = len(eps)
	v.eds = marshal(svc.name, assignment(svc.name, eps, md.opts.EndpointStaleAfter))
	if svc.views == nil {
		svc.views = make(map[string]*view)
	}
	svc.views[a.key] = v
	return v
}

// healthOf is what a member is sent as: HEALTHY when ready; otherwise
// left out (UNKNOWN here: gRPC and Envoy take an unset status as
// healthy, so it is never sent), or with Options.SendUnready UNHEALTHY,
// DRAINING when terminating.
func (md *model) healthOf(m member) corev3.HealthStatus {
	switch {
	case m.ready:
		return corev3.HealthStatus_HEALTHY
	case !md.opts.SendUnready:
		return corev3.HealthStatus_UNKNOWN
	case m.terminating:
		return corev3.HealthStatus_DRAINING
	default:
		return corev3.HealthStatus_UNHEALTHY
	}
}

func rank(h corev3.HealthStatus) int {
	switch h {
	case corev3.HealthStatus_HEALTHY:
		return 3
	case corev3.HealthStatus_DRAINING:
		return 2
	default:
		return 1
	}
}

// scopeLocked returns the services a watch covers, by name: every
// service its access sees for a wildcard, else the subscribed ones that
// exist for it.
func (md *model) scopeLocked(w *watch) []*service {
	var out []*service
	if w.wildcard {
		for _, svc := range md.services {
			if md.viewLocked(svc, w.st.access).visible {
				out = append(out, svc)
			}
		}
	} else {
		for name := range w.names {
			if svc := md.services[name]; svc != nil && md.viewLocked(svc, w.st.access).visible {
				out = append(out, svc)
			}
		}
	}
	slices.SortFunc(out, func(a, b *service) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return out
}

// resourcesLocked returns the resources of w's type for its scope.
func (md *model) resourcesLocked(w *watch) []resource {
	scope := md.scopeLocked(w)
	out := make([]resource, len(scope))
	for i, svc := range scope {
		switch w.typ {
		case ListenerType:
			out[i] = svc.lds
		case ClusterType:
			out[i] = svc.cds
		default:
			out[i] = md.viewLocked(svc, w.st.access).eds
		}
	}
	return out
}

// notifyLocked evaluates the watches c may concern.
func (md *model) notifyLocked(c *change) {
	for w := range md.watches {
		if !c.structural && !w.concerns(c) {
			continue
		}
		if md.evaluateLocked(w) {
			md.dropLocked(w)
		}
	}
}

// addLocked registers w and answers it at once if it can.
func (md *model) addLocked(w *watch) {
	md.watches[w] = struct{}{}
	if md.evaluateLocked(w) {
		md.dropLocked(w)
	}
}

func (md *model) dropLocked(w *watch) {
	delete(md.watches, w)
	if w.expiry != nil {
		w.expiry.Stop()
	}
}

// version is the version_info of a response at revision rev.
func version(rev uint64) string { return strconv.FormatUint(rev, 10) }

// sameKeys reports whether returned holds exactly the names of rs, each
// at its hash.
func sameKeys(returned map[string]string, rs []resource) bool {
	if len(returned) != len(rs) {
		return false
	}
	for _, r := range rs {
		if returned[r.name] != r.hash {
			return false
		}
	}
	return true
}

// returnedOf maps the names of rs to their hashes (a new map: the server
// keeps and edits it).
func returnedOf(rs []resource) map[string]string {
	m := make(map[string]string, len(rs))
	for _, r := range rs {
		m[r.name] = r.hash
	}
	return m
}

// counts returns the model's figures.
func (md *model) counts() (services, endpoints int, excluded map[string]int) {
	md.mu.Lock()
	defer md.mu.Unlock()
	all := &access{}
	for _, svc := range md.services {
		services++
		endpoints += md.viewLocked(svc, all).endpoints
	}
	return services, endpoints, maps.Clone(md.excluded)
}
