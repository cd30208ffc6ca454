package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Defaults of Options.
const (
	// DefaultInitialPeriod is Knative queue-proxy's retry interval. probed
	// refuses it unless it runs with --min-period=50ms or less.
	DefaultInitialPeriod = 50 * time.Millisecond
	// DefaultPeriod is kubelet's best period.
	DefaultPeriod = time.Second
	// DefaultTimeout is the Knative activator's probe timeout.
	DefaultTimeout = 300 * time.Millisecond
	// DefaultHoldTimeout bounds the wait for a backend.
	DefaultHoldTimeout = time.Minute
)

// ManagedByLabel is the label key set on the targets a proxy registers
// (with the value "probed-activator" unless Options.Labels says
// otherwise).
const ManagedByLabel = "app.kubernetes.io/managed-by"

// Backend is a service the proxy forwards to.
type Backend struct {
	// Name routes requests to the backend (see Proxy) and is the name of
	// its target in probed: a DNS-1123 label such as "hello".
	Name string
	// Addr is the backend's host:port, for both the requests and the
	// readiness probe.
	Addr string
}

// ParseBackend parses "name=host:port".
func ParseBackend(s string) (Backend, error) {
	name, addr, ok := strings.Cut(s, "=")
	if !ok {
		return Backend{}, fmt.Errorf("backend %q: want name=host:port", s)
	}
	b := Backend{Name: name, Addr: addr}
	if _, _, err := b.hostPort(); err != nil {
		return Backend{}, err
	}
	return b, nil
}

// dnsLabel matches a DNS-1123 label, what probed accepts as a target name.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// hostPort splits Addr and checks both halves.
func (b Backend) hostPort() (string, int32, error) {
	if len(b.Name) > 63 || !dnsLabel.MatchString(b.Name) {
		return "", 0, fmt.Errorf("backend name %q: want a DNS-1123 label (lower-case alphanumerics and '-', at most 63 characters), the name of its target", b.Name)
	}
	host, p, err := net.SplitHostPort(b.Addr)
	if err != nil {
		return "", 0, fmt.Errorf("backend %s: address %q: %w", b.Name, b.Addr, err)
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 || host == "" {
		return "", 0, fmt.Errorf("backend %s: address %q: want host:port with a port from 1 to 65535", b.Name, b.Addr)
	}
	return host, int32(port), nil
}

// Options tune a Proxy; the zero value uses the defaults.
//
// The readiness probe is Knative's (GET /healthz with "K-Network-Probe:
// queue", expecting 200 and the body "queue") made fast until ready, as
// KEP-3066 proposes: every InitialPeriod until the backend is first
// ready, then every Period.
type Options struct {
	// InitialPeriod is the probe period until the backend is first ready
	// (default DefaultInitialPeriod). The probed server must allow it:
	// --min-period must be at most this.
	InitialPeriod time.Duration
	// Period is the probe period once the backend has been ready
	// (default DefaultPeriod).
	Period time.Duration
	// Timeout of one probe (default DefaultTimeout).
	Timeout time.Duration
	// FailureThreshold is how many consecutive failed probes make a ready
	// backend unready again; 0 means probed's default (3).
	FailureThreshold int32
	// HoldTimeout bounds a wait for a backend to become ready (default
	// DefaultHoldTimeout); the requests held by it then fail with 503.
	HoldTimeout time.Duration
	// IdleTimeout: a backend that got no request for this long is
	// forgotten, its target deleted, as a scaled-to-zero revision is
	// (0: never).
	IdleTimeout time.Duration
	// Labels are set on every target the proxy registers; it watches its
	// targets by them. Default: ManagedByLabel=probed-activator.
	Labels map[string]string
	// Transport forwards the requests (default: a clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
	// Logger (default: discard).
	Logger *slog.Logger
}

func (o *Options) setDefaults() error {
	if o.InitialPeriod == 0 {
		o.InitialPeriod = DefaultInitialPeriod
	}
	if o.Period == 0 {
		o.Period = DefaultPeriod
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.HoldTimeout == 0 {
		o.HoldTimeout = DefaultHoldTimeout
	}
	if len(o.Labels) == 0 {
		o.Labels = map[string]string{ManagedByLabel: "probed-activator"}
	} else {
		o.Labels = maps.Clone(o.Labels)
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"InitialPeriod", o.InitialPeriod}, {"Period", o.Period}, {"Timeout", o.Timeout}} {
		if d.v < time.Millisecond || d.v%time.Millisecond != 0 || d.v > time.Hour {
			errs = append(errs, fmt.Errorf("proxy: Options.%s %v: want a whole number of milliseconds from 1ms to 1h", d.name, d.v))
		}
	}
	if o.FailureThreshold < 0 {
		errs = append(errs, fmt.Errorf("proxy: Options.FailureThreshold %d is negative", o.FailureThreshold))
	}
	if o.HoldTimeout < 0 || o.IdleTimeout < 0 {
		errs = append(errs, errors.New("proxy: Options.HoldTimeout and IdleTimeout must not be negative"))
	}
	return errors.Join(errs...)
}
