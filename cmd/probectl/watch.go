package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func newWatchCommand(o *rootOptions) *cobra.Command {
	var (
		since    uint64
		selector string
		kinds    []string
	)
	cmd := &cobra.Command{
		Use:   "watch [--since REV] [-l KEY=VALUE,...] [--kinds KIND,...] [NAME...]",
		Short: "Follow events: the current state, then every change",
		Long: `Watch prints the current state of the targets (a snapshot), or with
--since every retained event from that revision on, then follows live
events, one line each, until interrupted. It reconnects by itself, without
losing or repeating an event, and says on stderr when it cannot reach
probed and when it is connected again, and when no target matches yet
(it then waits for one to appear).

Kinds: snapshot, transition, initialized, created, updated, reset,
terminating, deleted. -o json prints one JSON event per line.`,
		Example: `  probectl watch --since 1 page`,
		RunE: func(cmd *cobra.Command, names []string) error {
			labels, err := parseSelector(selector)
			if err != nil {
				return err
			}
			ks, err := parseKinds(kinds)
			if err != nil {
				return err
			}
			opts := []client.WatchOption{client.WithSince(since), client.WithLabels(labels), client.WithKinds(ks...), client.WithNamespace(o.namespace)}
			for i, n := range names {
				names[i] = o.qualify(n)
			}
			if len(names) > 0 {
				opts = append(opts, client.WithNames(names...))
			}
			notice := newConnNotice(cmd.ErrOrStderr(), o.addr)
			opts = append(opts, client.WithStateFunc(notice.state))
			w := watching{names: names, selector: selector, snapshot: since == 0}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				return follow(ctx, c, cmd, o.output, opts, w)
			})
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&since, "since", 0, "replay retained events from this revision instead of starting with a snapshot")
	f.StringVarP(&selector, "selector", "l", "", "only targets with all these labels: KEY=VALUE,...")
	f.StringSliceVar(&kinds, "kinds", nil, "only these kinds of events (snapshots are always shown)")
	return cmd
}

// watching is what a watch asked for, to say what it waits for when
// nothing matches.
type watching struct {
	names    []string
	selector string
	snapshot bool // it starts with a snapshot (no --since)
}

// missing returns a line for stderr when the first snapshot, holding the
// targets seen, lacks what the watch asked for; "" when nothing is
// missing.
func (w watching) missing(seen map[string]bool) string {
	var absent []string
	for _, n := range w.names {
		if !seen[n] {
			absent = append(absent, strconv.Quote(n))
		}
	}
	switch {
	case len(absent) == 1:
		return fmt.Sprintf("probectl: no target named %s yet; waiting for it (Ctrl-C to stop)", absent[0])
	case len(absent) > 1:
		return fmt.Sprintf("probectl: no targets named %s yet; waiting for them (Ctrl-C to stop)", strings.Join(absent, ", "))
	case len(seen) > 0 || len(w.names) > 0:
		return ""
	case w.selector != "":
		return fmt.Sprintf("probectl: no target matches %s yet; waiting for one (Ctrl-C to stop)", w.selector)
	default:
		return "probectl: no targets yet; waiting for events (Ctrl-C to stop)"
	}
}

// follow prints events until ctx is done (nil) or the watch fails.
func follow(ctx context.Context, c *client.Client, cmd *cobra.Command, format string, opts []client.WatchOption, w watching) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := newEventPrinter(cmd.OutOrStdout(), format)
	seen := map[string]bool{} // the first snapshot's targets
	for r := range c.Watch(ctx, opts...) {
		if r.Err != nil {
			return r.Err
		}
		if r.Resynced {
			_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "probectl: could not resume the watch where it stopped; starting again from a new snapshot")
		}
		for _, ev := range r.Events {
			if err := p.print(ev); err != nil {
				return err
			}
			if w.snapshot && r.Snapshot {
				seen[ev.GetName()] = true
			}
		}
		if w.snapshot && r.SnapshotComplete {
			if line := w.missing(seen); line != "" {
				_, _ = fmt.Fprintln(cmd.ErrOrStderr(), line)
			}
			w.snapshot = false // say it once
		}
	}
	return nil
}

// parseKinds parses event kinds: "transition", "TRANSITION" or
// "EVENT_KIND_TRANSITION".
func parseKinds(names []string) ([]probev1.EventKind, error) {
	var kinds []probev1.EventKind
	for _, n := range names {
		up := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(n)), "EVENT_KIND_")
		v, ok := probev1.EventKind_value["EVENT_KIND_"+up]
		if !ok || v == int32(probev1.EventKind_EVENT_KIND_UNSPECIFIED) {
			return nil, fmt.Errorf("unknown event kind %q: want snapshot, transition, initialized, created, updated, reset, terminating or deleted", n)
		}
		kinds = append(kinds, probev1.EventKind(v))
	}
	return kinds, nil
}
