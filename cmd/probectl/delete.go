package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func newDeleteCommand(o *rootOptions) *cobra.Command {
	var grace int64
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a target gracefully",
		Long: `Delete starts the graceful removal of a target: it becomes Terminating,
its readiness fails at once, its preStop sleep runs, then it is removed.
The command returns at once.

--grace-period overrides the target's terminationGracePeriodSeconds for
this deletion: the preStop sleep is cut to it, and 0 removes the target at
once (kubectl's --grace-period=0 --force). It also shortens the removal of
a target already terminating.`,
		Example: `  probectl delete backend`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts []client.DeleteOption
			switch {
			case grace >= 0:
				opts = append(opts, client.GracePeriod(grace))
			case grace != -1:
				return &usageError{fmt.Errorf("--grace-period %d: must be -1 (the target's own) or at least 0", grace)}
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Delete(ctx, o.qualify(args[0]), opts...)
				if err != nil {
					return err
				}
				if o.output == outputTable {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "target/%s deleted\n", t.GetName())
					return err
				}
				return printTargets(cmd.OutOrStdout(), o.output, o.now(), []*probev1.Target{t}, true)
			})
		},
	}
	cmd.Flags().Int64Var(&grace, "grace-period", -1, "seconds the target may take to terminate, overriding its terminationGracePeriodSeconds (0: remove at once; -1: the target's own)")
	return cmd
}
