package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func newResetCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "reset NAME",
		Short: "Tell probed that a target restarted",
		Long: `Reset returns every probe of the target to its initial state; the
startup probe runs again.`,
		Example: `  probectl reset page`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Reset(ctx, o.qualify(args[0]))
				if err != nil {
					return err
				}
				if o.output == outputTable {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "target/%s reset\n", t.GetName())
					return err
				}
				return printTargets(cmd.OutOrStdout(), o.output, o.now(), []*probev1.Target{t}, true)
			})
		},
	}
}
