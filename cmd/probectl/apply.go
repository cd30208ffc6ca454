package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func newApplyCommand(o *rootOptions) *cobra.Command {
	var (
		files    []string
		prune    pruneOptions
		selector string
	)
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|- [-f ...] [--prune --selector KEY=VALUE [--dry-run]]",
		Short: "Create targets, or update them when they exist, from JSON or YAML specs",
		Long: `Apply creates each target of the files given with -f, or replaces its spec
when a target by its name exists. A file holds a target in probe.v1's JSON
form (lowerCamelCase field names), as JSON or YAML; several YAML documents
separated by "---", or a list, hold several targets. -f may be repeated; a
directory applies its .yaml, .yml and .json files (not its
subdirectories) in name order; "-" reads standard input.

Every file is read and checked before anything is applied: each field
name that does not exist is reported, and so is a target named twice. A
target the server rejects is reported, and the others are still applied.

With --prune, the files are the complete set (kubectl's convention): in
one ApplyTargets call, probed creates and updates them and deletes the
targets of the same --owner (default "probectl", with -n "NAMESPACE/probectl",
so that each namespace's set is pruned on its own) that carry the
--selector labels and are no longer in the files. Every target in the
files must carry those labels. Targets of another owner, or created
without --prune, are never changed: a name they hold is reported as a
conflict. --dry-run prints the plan and changes nothing.`,
		Example: `  cat <<EOF | probectl apply -f -
  name: page
  labels: {app: probed}
  readinessProbe:
    tcpSocket: {host: 127.0.0.1, port: 8080}
    periodSeconds: 1
    periodMilliseconds: -900
  EOF`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("apply reads files given with -f: did you mean \"probectl apply -f %s\"?", strings.Join(args, " -f "))
			}
			if len(files) == 0 {
				return errors.New(`apply needs -f FILE: a file, a directory, or "-" for standard input`)
			}
			if !prune.enabled && (selector != "" || prune.dryRun) {
				return errors.New("--selector and --dry-run go with --prune")
			}
			if prune.enabled && strings.TrimSpace(selector) == "" {
				return errors.New("--prune needs --selector KEY=VALUE: the labels that scope the set it prunes")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			specs, err := readSpecs(cmd.InOrStdin(), files)
			if err != nil {
				return err
			}
			if err := o.qualifySpecs(specs); err != nil {
				return err
			}
			if prune.enabled {
				if prune.selector, err = parseSelector(selector); err != nil {
					return &usageError{err}
				}
				// kubectl prunes within -n's namespace: each namespace's
				// set is its own owner's, unless --owner says otherwise.
				if !cmd.Flags().Changed("owner") && o.namespace != "" {
					prune.owner = o.namespace + "/" + prune.owner
				}
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if prune.enabled {
					return applySet(ctx, c, cmd.OutOrStdout(), cmd.ErrOrStderr(), o.output, specs, prune)
				}
				return apply(ctx, c, cmd.OutOrStdout(), cmd.ErrOrStderr(), o.output, specs)
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&files, "filename", "f", nil, `file or directory of target specs, JSON or YAML; "-" for standard input; may be repeated`)
	f.BoolVar(&prune.enabled, "prune", false, "the files are the whole set: delete the owner's targets with the --selector labels that they leave out")
	f.StringVarP(&selector, "selector", "l", "", "with --prune: the labels KEY=VALUE,... that scope the set")
	f.StringVar(&prune.owner, "owner", "probectl", `with --prune: the owner (set name) of the targets; with -n, "NAMESPACE/probectl" by default`)
	f.BoolVar(&prune.dryRun, "dry-run", false, "with --prune: print what would be done, change nothing")
	return cmd
}

// pruneOptions are apply's --prune flags.
type pruneOptions struct {
	enabled  bool
	owner    string
	selector map[string]string
	dryRun   bool
}

// applySet applies specs as the whole set of o.owner (ApplyTargets) and
// prints what was done, one line per target as kubectl does ("(dry run)"
// after each for a dry run). Conflicts are printed to errOut and fail the
// command once everything else is applied.
func applySet(ctx context.Context, c *client.Client, w, errOut io.Writer, format string, specs []spec, o pruneOptions) error {
	set := client.TargetSet{Owner: o.owner, Selector: o.selector, DryRun: o.dryRun}
	for _, sp := range specs {
		set.Targets = append(set.Targets, sp.target)
	}
	resp, err := c.ApplyTargets(ctx, set)
	if err != nil {
		return err
	}
	if format != outputTable {
		if err := printMessage(w, format, resp); err != nil {
			return err
		}
	} else {
		suffix := ""
		if resp.GetDryRun() {
			suffix = " (dry run)"
		}
		var b strings.Builder
		for _, group := range []struct {
			verb  string
			names []string
		}{{"created", resp.GetCreated()}, {"configured", resp.GetUpdated()}, {"unchanged", resp.GetUnchanged()}, {"pruned", resp.GetDeleted()}} {
			for _, n := range group.names {
				fmt.Fprintf(&b, "target/%s %s%s\n", n, group.verb, suffix)
			}
		}
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	for _, cf := range resp.GetConflicts() {
		_, _ = fmt.Fprintf(errOut, "target/%s: conflict: %s\n", cf.GetName(), cf.GetMessage())
	}
	if n := len(resp.GetConflicts()); n > 0 {
		return fmt.Errorf("%d of %d targets not applied (conflicts)", n, len(specs))
	}
	return nil
}

// spec is a target read from a file.
type spec struct {
	target *probev1.Target
	source string // the file or "stdin", with the document's number if several
}

// apply applies specs in order and says what happened to each. One
// target's error (an invalid spec, a failed precondition) is printed to
// errOut and the others are still applied; an error that would fail them
// all (probed unreachable, credentials refused) ends apply at once.
func apply(ctx context.Context, c *client.Client, w, errOut io.Writer, format string, specs []spec) error {
	applied := make([]*probev1.Target, 0, len(specs))
	failed := 0
	for _, sp := range specs {
		got, created, err := c.Apply(ctx, sp.target)
		if err != nil {
			if len(specs) == 1 || !perTarget(err) {
				return err
			}
			failed++
			printTargetError(errOut, sp, err)
			continue
		}
		if format == outputTable {
			verb := "configured"
			if created {
				verb = "created"
			}
			if _, err := fmt.Fprintf(w, "target/%s %s\n", got.GetName(), verb); err != nil {
				return err
			}
		}
		applied = append(applied, got)
	}
	if format != outputTable && len(applied) > 0 {
		if err := printTargets(w, format, time.Time{}, applied, len(specs) == 1); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d targets not applied", failed, len(specs))
	}
	return nil
}

// perTarget reports whether err concerns one target only, so that apply
// goes on with the others.
func perTarget(err error) bool {
	for _, all := range []error{client.ErrUnavailable, client.ErrUnauthenticated, client.ErrPermissionDenied, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, all) {
			return false
		}
	}
	return true
}

// printTargetError prints one target's error, naming the target and its
// file.
func printTargetError(w io.Writer, sp spec, err error) {
	var b strings.Builder
	fmt.Fprintf(&b, "target/%s (%s): ", sp.target.GetName(), sp.source)
	if inv, ok := errors.AsType[*client.InvalidError](err); ok && len(inv.Violations) > 0 {
		b.WriteString("invalid:\n")
		for _, v := range inv.Violations {
			fmt.Fprintf(&b, "  %s: %s\n", v.Field, v.Description)
		}
	} else {
		fmt.Fprintf(&b, "%v\n", err)
	}
	_, _ = io.WriteString(w, b.String())
}

// specExtensions are the files apply reads from a directory.
var specExtensions = []string{".yaml", ".yml", ".json"}

// readSpecs reads and parses every file (a directory: its spec files;
// "-": in) and returns their targets in order. Every problem of every
// file is reported, and nothing is returned, when there is one.
func readSpecs(in io.Reader, files []string) ([]spec, error) {
	var (
		specs []spec
		errs  []error
		stdin bool
		where = map[string]string{} // target name -> its source
	)
	add := func(source string, data []byte) {
		targets, sources, err := parseTargets(source, data)
		if err != nil {
			errs = append(errs, err)
			return
		}
		for i, t := range targets {
			if prev, dup := where[t.GetName()]; dup {
				errs = append(errs, fmt.Errorf("%s: target %q is also in %s", sources[i], t.GetName(), prev))
				continue
			}
			where[t.GetName()] = sources[i]
			specs = append(specs, spec{target: t, source: sources[i]})
		}
	}
	for _, f := range files {
		if f == "-" {
			if stdin {
				errs = append(errs, errors.New(`"-f -" (standard input) given twice`))
				continue
			}
			stdin = true
			data, err := io.ReadAll(in)
			if err != nil {
				errs = append(errs, fmt.Errorf("stdin: %w", err))
				continue
			}
			add("stdin", data)
			continue
		}
		paths, err := specFiles(f)
		if err != nil {
			errs = append(errs, pathError(err))
			continue
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				errs = append(errs, pathError(err))
				continue
			}
			add(p, data)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return specs, nil
}

// pathError turns "open PATH: no such file or directory" into "PATH: no
// such file or directory".
func pathError(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

// specFiles returns path when it is a file, and its spec files in name
// order when it is a directory.
func specFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		if e.Type().IsRegular() && slices.Contains(specExtensions, strings.ToLower(filepath.Ext(e.Name()))) {
			paths = append(paths, filepath.Join(path, e.Name()))
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no %s file in this directory", path, strings.Join(specExtensions, ", "))
	}
	return paths, nil
}

// qualifySpecs puts the names of specs in the namespace of -n (see
// qualify); a spec named in another namespace is an error, as in kubectl.
func (o *rootOptions) qualifySpecs(specs []spec) error {
	if o.namespace == "" {
		return nil
	}
	for _, sp := range specs {
		name := sp.target.GetName()
		if ns, _, ok := strings.Cut(name, "/"); ok && ns != o.namespace {
			return &usageError{fmt.Errorf("%s: target %q is not in namespace %q (-n)", sp.source, name, o.namespace)}
		}
		sp.target.Name = o.qualify(name)
	}
	return nil
}
