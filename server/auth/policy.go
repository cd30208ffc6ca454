package auth

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"sigs.k8s.io/yaml"
)

// Verbs a policy rule grants (see Policy).
const (
	VerbRead    = "read"    // GetTarget, ListTargets, Watch, the status page
	VerbWrite   = "write"   // CreateTarget, UpdateTarget, DeleteTarget, ApplyTargets
	VerbOperate = "operate" // TriggerProbe, ResetTarget
	// VerbMetrics grants scraping /metrics (and the --pprof profiles) on
	// the metrics listener, and nothing else; it is about no target, so a
	// rule granting it names every name: names: [""].
	VerbMetrics = "metrics"
)

// verbs are the verbs a rule may grant.
var verbs = []string{VerbRead, VerbWrite, VerbOperate, VerbMetrics}

// AnyIdentity in a rule's identities matches every authenticated caller.
const AnyIdentity = "*"

// Policy is the authorization policy of --authz-policy: YAML rules, each
// granting identities (token names, certificate identities, "*" for any
// caller) verbs (read, write, operate; metrics) on targets whose names
// start with one of its prefixes ("" is every name). What no rule grants
// is denied. A prefix is a plain string prefix, so one that is a whole
// DNS label without a slash ("team-a", which would also grant "team-ab/x")
// is refused: write "team-a/" for a namespace, or end a deliberate string
// prefix with '-' or '.' ("web-").
// The file is reread by Reload when it changes; a file that cannot be read
// or parsed leaves the previous policy in force. It is safe for
// concurrent use.
//
//	rules:
//	  - identities: [team-a-ci]
//	    names: ["team-a/"]
//	    verbs: [read, write, operate]
//	  - identities: ["*"]
//	    names: [""]
//	    verbs: [read]
//	  - identities: [prometheus]
//	    names: [""]
//	    verbs: [metrics]
type Policy struct {
	path  string
	rules atomic.Pointer[[]rule]
	stamp stamps // used by Reload only

	mu      sync.Mutex
	changed chan struct{} // closed when the policy changes; guarded by mu
}

// policyFile is the YAML form.
type policyFile struct {
	Rules []struct {
		Identities []string `json:"identities"`
		Names      []string `json:"names"`
		Verbs      []string `json:"verbs"`
	} `json:"rules"`
}

type rule struct {
	identities []string
	names      []string
	verbs      []string
}

// LoadPolicy reads the policy file at path (see parsePolicy).
func LoadPolicy(path string) (*Policy, error) {
	p := &Policy{path: path, changed: make(chan struct{})}
	st, err := stat(path)
	if err != nil {
		return nil, err
	}
	if err := p.load(); err != nil {
		return nil, err
	}
	p.stamp.current = []stamp{st}
	return p, nil
}

// parsePolicy parses a policy file: every rule needs identities, names and
// verbs; an unknown field or verb is an error, and so are a name prefix
// that is a whole DNS label without a slash (ambiguousPrefix) and the
// metrics verb in a rule that does not name every name.
func parsePolicy(data []byte) ([]rule, error) {
	var f policyFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, err
	}
	rules := make([]rule, 0, len(f.Rules))
	var errs []error
	for i, r := range f.Rules {
		switch {
		case len(r.Identities) == 0:
			errs = append(errs, fmt.Errorf("rules[%d]: identities: at least one (\"*\" for any caller)", i))
		case len(r.Names) == 0:
			errs = append(errs, fmt.Errorf("rules[%d]: names: at least one target-name prefix (\"\" for every name)", i))
		case len(r.Verbs) == 0:
			errs = append(errs, fmt.Errorf("rules[%d]: verbs: at least one of read, write, operate, metrics", i))
		}
		for _, v := range r.Verbs {
			if !slices.Contains(verbs, v) {
				errs = append(errs, fmt.Errorf("rules[%d]: verbs: unknown verb %q: want read, write, operate or metrics", i, v))
			}
		}
		for j, n := range r.Names {
			if ambiguousPrefix(n) {
				errs = append(errs, fmt.Errorf("rules[%d]: names[%d]: %q is a prefix of every name that starts with it (%q, %q too): "+
					"write %q to grant the namespace %s, or end a string prefix with '-' or '.'", i, j, n, n+"b/web", n+"-x", n+"/", n))
			}
		}
		if slices.Contains(r.Verbs, VerbMetrics) && !slices.Contains(r.Names, "") {
			errs = append(errs, fmt.Errorf(`rules[%d]: verbs: metrics is about no target: a rule granting it needs names: [""]`, i))
		}
		rules = append(rules, rule{identities: r.Identities, names: r.Names, verbs: r.Verbs})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rules, nil
}

func (p *Policy) load() error {
	data, err := os.ReadFile(p.path)
	if err != nil {
		return fmt.Errorf("authorization policy: %w", err)
	}
	rules, err := parsePolicy(data)
	if err != nil {
		return fmt.Errorf("authorization policy %s: %w", p.path, err)
	}
	p.rules.Store(&rules)
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	return nil
}

// ambiguousPrefix reports whether a rule's name prefix is a whole DNS
// label with no slash: a namespace or a plain target name whose prefix
// also grants the names that merely start with it ("team-a" grants
// "team-ab/x").
func ambiguousPrefix(prefix string) bool {
	return prefix != "" && !strings.Contains(prefix, "/") && dnsLabel.MatchString(prefix)
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Allowed reports whether identity may do verb to the target name.
func (p *Policy) Allowed(identity, verb, name string) bool {
	for _, r := range *p.rules.Load() {
		if r.grants(identity, verb, name) {
			return true
		}
	}
	return false
}

// AllowedAny reports whether identity may do verb to some target name: a
// rule grants it verb, on whatever prefix.
func (p *Policy) AllowedAny(identity, verb string) bool {
	for _, r := range *p.rules.Load() {
		if slices.Contains(r.verbs, verb) && r.matches(identity) {
			return true
		}
	}
	return false
}

// Grants returns a description of what identity may do (the rules that
// match it), to tell whether a change of policy changed its access.
func (p *Policy) Grants(identity string) string {
	var b strings.Builder
	for _, r := range *p.rules.Load() {
		if r.matches(identity) {
			fmt.Fprintf(&b, "%q %q;", r.names, r.verbs)
		}
	}
	return b.String()
}

func (r rule) grants(identity, verb, name string) bool {
	if !slices.Contains(r.verbs, verb) {
		return false
	}
	if !r.matches(identity) {
		return false
	}
	return slices.ContainsFunc(r.names, func(prefix string) bool { return strings.HasPrefix(name, prefix) })
}

// matches reports whether the rule is about identity.
func (r rule) matches(identity string) bool {
	return slices.Contains(r.identities, identity) || slices.Contains(r.identities, AnyIdentity)
}

// Changed returns a channel closed the next time the policy changes.
func (p *Policy) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// Reload rereads the policy file if it changed since the last load; see
// Policy.
func (p *Policy) Reload() (changed bool, err error) {
	return p.stamp.reload([]string{p.path}, p.load)
}

// String names the file, for logs.
func (p *Policy) String() string { return "authorization policy " + p.path }
