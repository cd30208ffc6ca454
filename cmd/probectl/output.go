package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// This file holds the printers: human tables, protojson and YAML.

// marshalJSON returns m as protojson with a stable layout (protojson's own
// whitespace varies on purpose), multi-line when indent is set.
func marshalJSON(m proto.Message, indent bool) ([]byte, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	if !indent {
		return buf.Bytes(), nil
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// printMessage prints m as indented JSON or as YAML.
func printMessage(w io.Writer, format string, m proto.Message) error {
	b, err := marshalJSON(m, true)
	if err != nil {
		return err
	}
	if format == outputYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printTargets prints targets in the format: a table (wide: with more
// columns), or (JSON/YAML) one target as itself and several as a
// ListTargetsResponse.
func printTargets(w io.Writer, format string, now time.Time, targets []*probev1.Target, single bool) error {
	switch {
	case format == outputTable || format == outputWide:
		return printTargetTable(w, now, targets, format == outputWide)
	case single && len(targets) == 1:
		return printMessage(w, format, targets[0])
	default:
		return printMessage(w, format, &probev1.ListTargetsResponse{Targets: targets})
	}
}

// printTargetTable prints NAME, PHASE, STARTED, LIVE, READY, each probe's
// result and effective period, AGE and why the target is not ready (the
// MESSAGE column); wide adds LABELS, REVISION, REPLICA (the replica
// that probes the target; only when a target has one, that is in a
// cluster), OWNER (the ApplyTargets set it belongs to; only when a target
// has one) and the message of a passing probe.
func printTargetTable(w io.Writer, now time.Time, targets []*probev1.Target, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "NAME\tPHASE\tSTARTED\tLIVE\tREADY\tSTARTUP\tLIVENESS\tREADINESS\tAGE\t"
	clustered := wide && slices.ContainsFunc(targets, func(t *probev1.Target) bool { return t.GetStatus().GetReplica() != "" })
	if wide {
		header += "LABELS\tREVISION\t"
	}
	if clustered {
		header += "REPLICA\t"
	}
	owned := wide && slices.ContainsFunc(targets, func(t *probev1.Target) bool { return t.GetOwner() != "" })
	if owned {
		header += "OWNER\t"
	}
	_, _ = fmt.Fprintln(tw, header+"MESSAGE")
	for _, t := range targets {
		st := t.GetStatus()
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%t\t%t\t%t\t%s\t%s\t%s\t%s\t",
			t.GetName(), phaseName(st.GetPhase()), st.GetStarted(), st.GetLive(), st.GetReady(),
			probeColumn(st.GetStartup()), probeColumn(st.GetLiveness()), probeColumn(st.GetReadiness()),
			age(now, st.GetCreateTime().AsTime()))
		if wide {
			_, _ = fmt.Fprintf(tw, "%s\t%d\t", labelsCell(t.GetLabels()), st.GetRevision())
		}
		if clustered {
			_, _ = fmt.Fprintf(tw, "%s\t", orDash(st.GetReplica()))
		}
		if owned {
			_, _ = fmt.Fprintf(tw, "%s\t", orDash(t.GetOwner()))
		}
		_, _ = fmt.Fprintln(tw, messageCell(t, wide))
	}
	return tw.Flush() // reports the writes' errors
}

// labelsCell is "k=v,k2=v2" in key order, or "-".
func labelsCell(labels map[string]string) string {
	if len(labels) == 0 {
		return "-"
	}
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	return cell(strings.Join(pairs, ","), maxMessage)
}

func phaseName(p probev1.Phase) string {
	switch p {
	case probev1.Phase_PHASE_ACTIVE:
		return "Active"
	case probev1.Phase_PHASE_TERMINATING:
		return "Terminating"
	default:
		return "Unknown"
	}
}

// probeColumn is "result/period", e.g. "success/100ms", or "-" when the
// target has no such probe.
func probeColumn(ps *probev1.ProbeStatus) string {
	if ps == nil {
		return "-"
	}
	return resultName(ps.GetResult()) + "/" + ps.GetEffective().GetPeriod().AsDuration().String()
}

func resultName(r probev1.Result) string {
	return enumName(r.String(), "RESULT_")
}

func probeName(p probev1.ProbeType) string {
	return enumName(p.String(), "PROBE_TYPE_")
}

func kindName(k probev1.EventKind) string {
	return enumName(k.String(), "EVENT_KIND_")
}

// enumName is an enum value's name without its prefix, in lower case:
// "RESULT_SUCCESS" is "success".
func enumName(s, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s, prefix))
}

// age formats how long ago t was the way kubectl does: "45s", "3m20s",
// "5h", "12d".
func age(now, t time.Time) string {
	if t.IsZero() || t.Unix() == 0 {
		return "<unknown>"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	s := int(d.Round(time.Second) / time.Second)
	m, h := s/60, s/3600
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case m < 10:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%ds", m, s%60)
	case m < 180:
		return fmt.Sprintf("%dm", m)
	case h < 8:
		if m%60 == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m%60)
	case h < 48:
		return fmt.Sprintf("%dh", h)
	case h < 24*8:
		if h%24 == 0 {
			return fmt.Sprintf("%dd", h/24)
		}
		return fmt.Sprintf("%dd%dh", h/24, h%24)
	default:
		return fmt.Sprintf("%dd", h/24)
	}
}

// reasonProbe is the reason of an event a probe run caused, which says
// nothing a reader does not see.
const reasonProbe = "Probe"

// latencyText is a latency with three significant digits at most:
// "412µs", "3.53ms", "1.2s".
func latencyText(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// eventTimeLayout is RFC 3339 with milliseconds.
const eventTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// eventPrinter prints watch events as they arrive: a table whose columns
// only ever widen (like `kubectl get -w`), one protojson object per line,
// or one YAML document per event.
type eventPrinter struct {
	w      io.Writer
	format string
	widths []int
	header bool
}

var eventColumns = []string{"REVISION", "TIME", "TARGET", "EVENT", "PROBE", "FROM→TO", "READY", "MESSAGE"}

// minEventWidths fit typical values, so that most lines line up from the
// first one.
var minEventWidths = []int{8, len("2006-01-02T15:04:05.000Z"), 12, len("initialized"), len("readiness"), len("unknown→success"), 5}

func newEventPrinter(w io.Writer, format string) *eventPrinter {
	return &eventPrinter{w: w, format: format, widths: append([]int(nil), minEventWidths...)}
}

func (p *eventPrinter) print(ev *probev1.Event) error {
	switch p.format {
	case outputJSON:
		b, err := marshalJSON(ev, false)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	case outputYAML:
		if _, err := io.WriteString(p.w, "---\n"); err != nil {
			return err
		}
		return printMessage(p.w, outputYAML, ev)
	}
	if !p.header {
		p.header = true
		if err := p.row(eventColumns); err != nil {
			return err
		}
	}
	return p.row(eventCells(ev))
}

// eventCells are the table cells of one event.
func eventCells(ev *probev1.Event) []string {
	when, probe, change := "-", "-", "-"
	if ev.GetTime() != nil {
		when = ev.GetTime().AsTime().UTC().Format(eventTimeLayout)
	}
	if ev.GetProbeType() != probev1.ProbeType_PROBE_TYPE_UNSPECIFIED {
		probe = probeName(ev.GetProbeType())
		change = resultName(ev.GetFrom()) + "→" + resultName(ev.GetTo())
	}
	msg := ev.GetMessage()
	if msg == "" && ev.GetReason() != reasonProbe {
		msg = ev.GetReason() // why the change happened, e.g. "Reset"
	}
	return []string{
		fmt.Sprint(ev.GetRevision()), when, ev.GetName(), kindName(ev.GetKind()),
		probe, change, fmt.Sprint(ev.GetReady()), cell(msg, maxMessage),
	}
}

// maxMessage is the most runes of a message a table shows.
const maxMessage = 100

// cell makes a message fit a table cell: one line, at most limit runes,
// "-" when empty, control characters (a probed server's reply may carry
// terminal escape sequences) shown as U+FFFD.
func cell(msg string, limit int) string {
	msg = strings.Join(strings.Fields(msg), " ")
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, msg)
	if msg == "" {
		return "-"
	}
	if utf8.RuneCountInString(msg) > limit {
		msg = string([]rune(msg)[:limit-1]) + "…"
	}
	return msg
}

// row prints cells padded to the widths seen so far; the last cell is not
// padded.
func (p *eventPrinter) row(cells []string) error {
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i == len(cells)-1 {
			break
		}
		n := utf8.RuneCountInString(c)
		p.widths[i] = max(p.widths[i], n)
		b.WriteString(strings.Repeat(" ", p.widths[i]-n+3))
	}
	b.WriteByte('\n')
	_, err := io.WriteString(p.w, b.String())
	return err
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
