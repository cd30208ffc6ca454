package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// deleteSources are the ways delete names its targets; several combine.
type deleteSources struct {
	selector string   // -l: the targets with these labels
	files    []string // -f: the targets of these spec files
	all      bool     // --all: every target
}

func newDeleteCommand(o *rootOptions) *cobra.Command {
	var (
		grace int64
		src   deleteSources
	)
	cmd := &cobra.Command{
		Use:   "delete NAME... | -l KEY=VALUE,... | -f FILE|DIR|- | --all",
		Short: "Delete targets gracefully",
		Long: `Delete starts the graceful removal of targets: each becomes Terminating,
its readiness fails at once, its preStop sleep runs, then it is removed.
The command returns at once.

The targets are the names given, those matching -l, those of the spec
files given with -f (as apply reads them), or --all of them; these
combine, and a target named twice is deleted once. A target that cannot
be deleted (not found) is reported and the others are still deleted.

--grace-period overrides the target's terminationGracePeriodSeconds for
this deletion: the preStop sleep is cut to it, and 0 removes the target at
once (kubectl's --grace-period=0 --force). It also shortens the removal of
a target already terminating.`,
		Example: `  probectl delete backend   # or: probectl delete -l app=demo, -f examples/targets/backend.yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 && src.selector == "" && len(src.files) == 0 && !src.all {
				return errors.New("delete needs target names, -l KEY=VALUE,..., -f FILE or --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts []client.DeleteOption
			switch {
			case grace >= 0:
				opts = append(opts, client.GracePeriod(grace))
			case grace != -1:
				return &usageError{fmt.Errorf("--grace-period %d: must be -1 (the target's own) or at least 0", grace)}
			}
			labels, err := parseSelector(src.selector)
			if err != nil {
				return &usageError{err}
			}
			names := make([]string, 0, len(args))
			for _, a := range args {
				names = append(names, o.qualify(a))
			}
			if len(src.files) > 0 {
				specs, err := readSpecs(cmd.InOrStdin(), src.files)
				if err != nil {
					return err
				}
				for _, sp := range specs {
					names = append(names, sp.target.GetName())
				}
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				// Listed targets gone before their turn were deleted by
				// someone else: not an error.
				listed := map[string]bool{}
				if labels != nil || src.all {
					targets, err := c.ListAll(ctx, labels)
					if err != nil {
						return err
					}
					for _, t := range targets {
						names = append(names, t.GetName())
						listed[t.GetName()] = true
					}
				}
				return deleteTargets(ctx, cmd, o, c, dedupe(names), listed, opts)
			})
		},
	}
	f := cmd.Flags()
	f.Int64Var(&grace, "grace-period", -1, "seconds the target may take to terminate, overriding its terminationGracePeriodSeconds (0: remove at once; -1: the target's own)")
	f.StringVarP(&src.selector, "selector", "l", "", "delete the targets with all these labels: KEY=VALUE,...")
	f.StringArrayVarP(&src.files, "filename", "f", nil, `delete the targets of this file or directory of specs; "-" for standard input; may be repeated`)
	f.BoolVar(&src.all, "all", false, "delete every target")
	return cmd
}

// deleteTargets deletes names in order and says what happened to each.
// One target's error is printed and the others are still deleted; an
// error that would fail them all (probed unreachable, credentials refused)
// ends it at once. A listed target that is not found any more is skipped.
func deleteTargets(ctx context.Context, cmd *cobra.Command, o *rootOptions, c *client.Client, names []string, listed map[string]bool, opts []client.DeleteOption) error {
	w, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if len(names) == 0 {
		_, err := fmt.Fprintln(errOut, "no target to delete")
		return err
	}
	deleted := make([]*probev1.Target, 0, len(names))
	failed := 0
	for _, name := range names {
		t, err := c.Delete(ctx, name, opts...)
		if listed[name] && errors.Is(err, client.ErrNotFound) {
			continue
		}
		if err != nil {
			if len(names) == 1 || !perTarget(err) {
				return err
			}
			failed++
			_, _ = fmt.Fprintf(errOut, "target/%s: %v\n", name, err)
			continue
		}
		if o.output == outputTable {
			if _, err := fmt.Fprintf(w, "target/%s deleted\n", t.GetName()); err != nil {
				return err
			}
		}
		deleted = append(deleted, t)
	}
	if o.output != outputTable && len(deleted) > 0 {
		if err := printTargets(w, o.output, o.now(), deleted, len(names) == 1); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d targets not deleted", failed, len(names))
	}
	return nil
}

// dedupe returns names without repeats, in the order of their first
// occurrence.
func dedupe(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
