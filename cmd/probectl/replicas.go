package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
)

func newReplicasCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "replicas",
		Short: "List the replicas of a probed cluster and the shards each probes",
		Long: `Replicas lists the probed processes of a cluster (probed --store=etcd): each
one's id, address and the number of shards it owns (it probes the targets of
those shards), and when it joined. A single probed is one replica probing
every target.`,
		Example: `  probectl replicas`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Replicas(ctx)
				if err != nil {
					return err
				}
				if o.output != outputTable && o.output != outputWide {
					return printMessage(cmd.OutOrStdout(), o.output, resp)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 3, ' ', 0)
				_, _ = fmt.Fprintln(tw, "REPLICA\tADDRESS\tSHARDS\tJOINED")
				for _, r := range resp.GetReplicas() {
					shards, joined := fmt.Sprint(r.GetShards()), "-"
					if resp.GetShards() == 0 {
						shards = "all" // a single probed
					}
					if r.GetJoinTime() != nil {
						joined = r.GetJoinTime().AsTime().UTC().Format("2006-01-02T15:04:05Z")
					}
					self := ""
					if r.GetId() == resp.GetSelf() && resp.GetShards() > 0 {
						self = " (answered)"
					}
					_, _ = fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", orDash(r.GetId()), self, r.GetAddress(), shards, joined)
				}
				return tw.Flush()
			})
		},
	}
}
