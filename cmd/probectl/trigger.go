package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func newTriggerCommand(o *rootOptions) *cobra.Command {
	var probe string
	cmd := &cobra.Command{
		Use:   "trigger NAME --probe startup|liveness|readiness",
		Short: "Run one probe of a target now and show its outcome",
		Long: `Trigger runs one probe of the target now and prints its raw outcome and
the probe's published result after it. When that probe is already running,
it waits for the running one instead of starting a second.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			typ, err := parseProbeType(probe)
			if err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Trigger(ctx, args[0], typ)
				if err != nil {
					return err
				}
				if o.output != outputTable {
					return printMessage(cmd.OutOrStdout(), o.output, resp)
				}
				return printTrigger(cmd, typ, resp)
			})
		},
	}
	cmd.Flags().StringVar(&probe, "probe", "", "the probe to run: startup, liveness or readiness")
	_ = cmd.MarkFlagRequired("probe")
	return cmd
}

func printTrigger(cmd *cobra.Command, typ probev1.ProbeType, resp *probev1.TriggerProbeResponse) error {
	out := resp.GetOutcome()
	latency := "-"
	if out.GetLatency() != nil {
		latency = out.GetLatency().AsDuration().String()
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 3, ' ', 0)
	_, _ = fmt.Fprintln(tw, "PROBE\tOUTCOME\tLATENCY\tRESULT\tMESSAGE")
	_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", probeName(typ), resultName(out.GetResult()), latency,
		resultName(resp.GetStatus().GetResult()), cell(out.GetMessage()))
	return tw.Flush() // reports the writes' errors
}

// parseProbeType parses "startup", "liveness" or "readiness".
func parseProbeType(s string) (probev1.ProbeType, error) {
	up := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "PROBE_TYPE_")
	v, ok := probev1.ProbeType_value["PROBE_TYPE_"+up]
	if !ok || v == int32(probev1.ProbeType_PROBE_TYPE_UNSPECIFIED) {
		return 0, fmt.Errorf("unknown probe %q: want startup, liveness or readiness", s)
	}
	return probev1.ProbeType(v), nil
}
