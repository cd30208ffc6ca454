package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func newDeleteCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a target gracefully",
		Long: `Delete starts the graceful removal of a target: it becomes Terminating,
its readiness fails at once, its preStop sleep runs, then it is removed.
The command returns at once.`,
		Example: `  probectl delete backend`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Delete(ctx, args[0])
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
}
