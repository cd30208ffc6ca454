package auth

import (
	"errors"
	"fmt"
	"os"
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
)

// AnyIdentity in a rule's identities matches every authenticated caller.
const AnyIdentity = "*"

// Policy is the authorization policy of --authz-policy: YAML rules, each
// granting identities (token names, certificate identities, "*" for any
// caller) verbs (read, write, operate) on targets whose names start with
// one of its prefixes ("" is every name). What no rule grants is denied.
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
// verbs; an unknown field or verb is an error.
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
			errs = append(errs, fmt.Errorf("rules[%d]: verbs: at least one of read, write, operate", i))
		}
		for _, v := range r.Verbs {
			if v != VerbRead && v != VerbWrite && v != VerbOperate {
				errs = append(errs, fmt.Errorf("rules[%d]: verbs: unknown verb %q: want read, write or operate", i, v))
			}
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

// Allowed reports whether identity may do verb to the target name.
func (p *Policy) Allowed(identity, verb, name string) bool {
	for _, r := range *p.rules.Load() {
		if r.grants(identity, verb, name) {
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
		if slices.Contains(r.identities, identity) || slices.Contains(r.identities, AnyIdentity) {
			fmt.Fprintf(&b, "%q %q;", r.names, r.verbs)
		}
	}
	return b.String()
}

func (r rule) grants(identity, verb, name string) bool {
	if !slices.Contains(r.verbs, verb) {
		return false
	}
	if !slices.Contains(r.identities, identity) && !slices.Contains(r.identities, AnyIdentity) {
		return false
	}
	return slices.ContainsFunc(r.names, func(prefix string) bool { return strings.HasPrefix(name, prefix) })
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
