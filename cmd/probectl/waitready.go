package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func newWaitReadyCommand(o *rootOptions) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait-ready NAME [--timeout 30s]",
		Short: "Wait until a target is ready",
		Long: `Wait-ready returns as soon as the target is ready, at once when it already
is. It fails when the target does not exist or is deleted, and after the
timeout (0 waits forever).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				wctx := ctx
				if timeout > 0 {
					var cancel context.CancelFunc
					wctx, cancel = context.WithTimeout(ctx, timeout)
					defer cancel()
				}
				t, err := c.WaitReady(wctx, name)
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					return fmt.Errorf("target %q did not become ready within %v", name, timeout)
				}
				if err != nil {
					return err
				}
				if o.output == outputTable {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "target/%s ready\n", t.GetName())
					return err
				}
				return printTargets(cmd.OutOrStdout(), o.output, o.now(), []*probev1.Target{t}, true)
			})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait; 0 waits forever")
	return cmd
}
