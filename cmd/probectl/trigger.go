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
		Use:   "trigger NAME [--probe startup|liveness|readiness]",
		Short: "Run one probe of a target now and show its outcome",
		Long: `Trigger runs one probe of the target now and prints its raw outcome and
the probe's published result after it. When that probe is already running,
it waits for the running one instead of starting a second. Without
--probe it runs the readiness probe, or the target's only probe.`,
		Example: `  probectl trigger page`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var typ probev1.ProbeType
			if probe != "" {
				var err error
				if typ, err = parseProbeType(probe); err != nil {
					return err
				}
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if typ == probev1.ProbeType_PROBE_TYPE_UNSPECIFIED {
					t, err := c.Get(ctx, o.qualify(args[0]))
					if err != nil {
						return err
					}
					if typ, err = defaultProbe(t); err != nil {
						return err
					}
				}
				resp, err := c.Trigger(ctx, o.qualify(args[0]), typ)
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
	cmd.Flags().StringVar(&probe, "probe", "", "the probe to run: startup, liveness or readiness (default: readiness, or the target's only probe)")
	return cmd
}

// defaultProbe is the probe trigger runs without --probe: readiness when
// t has one, else its only probe.
func defaultProbe(t *probev1.Target) (probev1.ProbeType, error) {
	var have []string
	var only probev1.ProbeType
	for _, p := range []struct {
		typ  probev1.ProbeType
		spec *probev1.Probe
	}{
		{probev1.ProbeType_PROBE_TYPE_STARTUP, t.GetStartupProbe()},
		{probev1.ProbeType_PROBE_TYPE_LIVENESS, t.GetLivenessProbe()},
		{probev1.ProbeType_PROBE_TYPE_READINESS, t.GetReadinessProbe()},
	} {
		if p.spec != nil {
			have = append(have, probeName(p.typ))
			only = p.typ
		}
	}
	switch {
	case t.GetReadinessProbe() != nil:
		return probev1.ProbeType_PROBE_TYPE_READINESS, nil
	case len(have) == 1:
		return only, nil
	case len(have) == 0:
		return 0, fmt.Errorf("target %q has no probe to trigger", t.GetName())
	default:
		return 0, fmt.Errorf("target %q has %s probes and no readiness probe: choose one with --probe", t.GetName(), strings.Join(have, " and "))
	}
}

func printTrigger(cmd *cobra.Command, typ probev1.ProbeType, resp *probev1.TriggerProbeResponse) error {
	out := resp.GetOutcome()
	if out == nil {
		// The caller may operate the target but not read it: the server
		// ran the probe and says nothing of its result.
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s probe triggered (its outcome is shown only to callers who may read the target)\n", probeName(typ))
		return err
	}
	latency := "-"
	if out.GetLatency() != nil {
		latency = latencyText(out.GetLatency().AsDuration())
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 3, ' ', 0)
	_, _ = fmt.Fprintln(tw, "PROBE\tOUTCOME\tLATENCY\tRESULT\tMESSAGE")
	_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", probeName(typ), resultName(out.GetResult()), latency,
		resultName(resp.GetStatus().GetResult()), cell(out.GetMessage(), maxMessage))
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
