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
is. It fails at once when probed cannot be reached or the target does not
exist, when the target is deleted, and after the timeout (0 waits
forever), saying why the target is not ready. If the connection to probed
is lost while waiting, it reconnects and says so on stderr.`,
		Example: `  probectl wait-ready page --timeout 10s && echo "page is ready"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := o.qualify(args[0])
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				// As list does: an unreachable probed or an unknown target
				// is an error at once, not after the timeout.
				if _, err := c.Get(ctx, name); err != nil {
					return err
				}
				wctx := ctx
				if timeout > 0 {
					var cancel context.CancelFunc
					wctx, cancel = context.WithTimeout(ctx, timeout)
					defer cancel()
				}
				notice := newConnNotice(cmd.ErrOrStderr(), o.addr)
				t, err := c.WaitReady(wctx, name, client.WithStateFunc(notice.state))
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					return o.notReadyError(ctx, c, name, timeout, notice)
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

// statusTimeout bounds the read of a target's status after wait-ready
// timed out.
const statusTimeout = 5 * time.Second

// notReadyError says why name did not become ready within timeout: its
// probe's last result and message, or that probed could not be reached.
func (o *rootOptions) notReadyError(ctx context.Context, c *client.Client, name string, timeout time.Duration, notice *connNotice) error {
	if err := notice.lastFailure(); err != nil {
		return fmt.Errorf("target %q did not become ready within %v: cannot reach probed at %s: %w", name, timeout, o.addr, err)
	}
	gctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	t, err := c.Get(gctx, name)
	if err != nil {
		return fmt.Errorf("target %q did not become ready within %v, and reading its status failed: %w", name, timeout, err)
	}
	return fmt.Errorf("target %q did not become ready within %v: %s", name, timeout, notReady(t, o.now()))
}
