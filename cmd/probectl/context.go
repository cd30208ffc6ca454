package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// contextFile is probectl's configuration file: named contexts, each the
// address of one probed (or cluster) with its TLS and token settings, as
// kubectl's kubeconfig has.
//
//	current-context: prod
//	contexts:
//	  - name: prod
//	    addr: probed-1.example:50051,probed-2.example:50051
//	    ca: ca.pem            # relative paths: to the file's directory
//	    cert: me.pem
//	    key: me-key.pem
//	    token-file: token
type contextFile struct {
	CurrentContext string          `json:"current-context,omitempty"`
	Contexts       []serverContext `json:"contexts"`
}

// serverContext is one named context: the values of the global flags of
// the same names.
type serverContext struct {
	Name      string `json:"name"`
	Addr      string `json:"addr,omitempty"`
	CA        string `json:"ca,omitempty"`
	Cert      string `json:"cert,omitempty"`
	Key       string `json:"key,omitempty"`
	TokenFile string `json:"token-file,omitempty"`
}

// defaultContextFile is where probectl looks for its contexts unless
// --config or PROBECTL_CONFIG says otherwise: probed/probectl.yaml in the
// user's configuration directory ($XDG_CONFIG_HOME, ~/.config).
func defaultContextFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "probed", "probectl.yaml")
}

// readContextFile reads and checks the file at path. A file that does not
// exist is no error unless required (named explicitly).
func readContextFile(path string, required bool) (*contextFile, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !required {
		return &contextFile{}, nil
	}
	if err != nil {
		return nil, pathError(err)
	}
	var f contextFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seen := map[string]bool{}
	for i, c := range f.Contexts {
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("%s: contexts[%d] has no name", path, i)
		case seen[c.Name]:
			return nil, fmt.Errorf("%s: context %q is defined twice", path, c.Name)
		}
		seen[c.Name] = true
		// Files are relative to the configuration file, as in kubeconfig.
		for _, p := range []*string{&f.Contexts[i].CA, &f.Contexts[i].Cert, &f.Contexts[i].Key, &f.Contexts[i].TokenFile} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(filepath.Dir(path), *p)
			}
		}
	}
	if f.CurrentContext != "" && !seen[f.CurrentContext] {
		return nil, fmt.Errorf("%s: current-context %q is not among the contexts (%s)", path, f.CurrentContext, f.names())
	}
	return &f, nil
}

// names lists the contexts' names for messages.
func (f *contextFile) names() string {
	var ns []string
	for _, c := range f.Contexts {
		ns = append(ns, c.Name)
	}
	if len(ns) == 0 {
		return "none defined"
	}
	return strings.Join(ns, ", ")
}

// find returns the context called name.
func (f *contextFile) find(name string) (serverContext, bool) {
	i := slices.IndexFunc(f.Contexts, func(c serverContext) bool { return c.Name == name })
	if i < 0 {
		return serverContext{}, false
	}
	return f.Contexts[i], true
}

// applyContext sets the global flags not given on the command line from
// the selected context. Precedence, highest first: the flags; the context
// named by --context; PROBED_ADDR (for the address); the file's
// current-context; the defaults.
func (o *rootOptions) applyContext(cmd *cobra.Command) error {
	path, required := o.configFile, o.configFile != ""
	if !required {
		if env := os.Getenv("PROBECTL_CONFIG"); env != "" {
			path, required = env, true
		} else {
			path = defaultContextFile()
		}
	}
	if path == "" {
		if o.context != "" {
			return &usageError{fmt.Errorf("--context %q: no configuration file (set --config)", o.context)}
		}
		return nil
	}
	f, err := readContextFile(path, required)
	if err != nil {
		return err
	}
	name, explicit := o.context, o.context != ""
	if !explicit {
		name = f.CurrentContext
	}
	if name == "" {
		return nil
	}
	c, ok := f.find(name)
	if !ok {
		return &usageError{fmt.Errorf("--context %q: no such context in %s (%s)", name, path, f.names())}
	}
	flags := cmd.Flags()
	set := func(flag string, dst *string, v string) {
		if v != "" && !flags.Changed(flag) {
			*dst = v
		}
	}
	if explicit || os.Getenv("PROBED_ADDR") == "" {
		set("addr", &o.addr, c.Addr)
	}
	set("ca", &o.caFile, c.CA)
	set("cert", &o.certFile, c.Cert)
	set("key", &o.keyFile, c.Key)
	set("token-file", &o.tokenFile, c.TokenFile)
	return nil
}
