package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func newGetCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "get NAME",
		Short:   "Show a target with its status",
		Example: `  probectl get page -o yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Get(ctx, o.qualify(args[0]))
				if err != nil {
					return err
				}
				return printTargets(cmd.OutOrStdout(), o.output, o.now(), []*probev1.Target{t}, true)
			})
		},
	}
}
