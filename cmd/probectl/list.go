package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
)

func newListCommand(o *rootOptions) *cobra.Command {
	var selector string
	cmd := &cobra.Command{
		Use:     "list [-l KEY=VALUE,...]",
		Aliases: []string{"ls"},
		Short:   "List targets in name order, with why each one is not ready",
		Example: `  probectl list -l app=probed -o wide`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			labels, err := parseSelector(selector)
			if err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				targets, err := c.ListAllOf(ctx, client.ListOptions{Labels: labels, Namespace: o.namespace})
				if err != nil {
					return err
				}
				return printTargets(cmd.OutOrStdout(), o.output, o.now(), targets, false)
			})
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only targets with all these labels: KEY=VALUE,...")
	return cmd
}

// parseSelector parses "k=v,k2=v2" into a label map; "" is no selector.
func parseSelector(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	labels := make(map[string]string)
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("bad label selector %q: want KEY=VALUE pairs separated by commas", s)
		}
		if _, dup := labels[k]; dup {
			return nil, fmt.Errorf("bad label selector %q: label %q given twice", s, k)
		}
		labels[k] = v
	}
	return labels, nil
}
