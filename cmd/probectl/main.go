// Command probectl is probed's command-line client: it applies target
// specs (JSON or YAML), shows targets, triggers and resets probes, follows
// events and waits for a target to become ready. Run `probectl --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/probed/probed/client"
)

// defaultAddr is where probectl looks for probed unless --addr or
// PROBED_ADDR says otherwise.
const defaultAddr = "127.0.0.1:50051"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs probectl with args and returns its exit status: 0 on success,
// 1 after printing the error to errOut.
func run(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) int {
	errOut = &lockedWriter{w: errOut}
	root := newRootCommand(out, errOut)
	root.SetArgs(args)
	root.SetIn(in)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	printError(errOut, err)
	if isUsageError(err) {
		// One line pointing to the help, rather than the whole usage
		// scrolling the message away.
		_, _ = fmt.Fprintf(errOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return 1
}

// usageError is a mistake in the command line: a bad flag, flag value or
// argument.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// isUsageError reports whether err is a mistake in the command line
// (cobra reports an unknown command as a plain error).
func isUsageError(err error) bool {
	_, ok := errors.AsType[*usageError](err)
	return ok || strings.HasPrefix(err.Error(), "unknown command ")
}

// markUsageErrors makes the flag and argument errors of cmd and its
// subcommands usage errors.
func markUsageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return &usageError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markUsageErrors(sub)
	}
}

// rootOptions are the global flags.
type rootOptions struct {
	addr      string
	caFile    string
	certFile  string
	keyFile   string
	tokenFile string
	output    string
	namespace string

	// now is the clock used for ages; tests replace it.
	now func() time.Time
}

// Output formats of -o.
const (
	outputTable = "table"
	outputWide  = "wide" // list and get only
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// newRootCommand builds probectl's command tree, writing results to out
// and diagnostics to errOut. Errors are returned by Execute, not printed.
func newRootCommand(out, errOut io.Writer) *cobra.Command {
	o := &rootOptions{now: time.Now}
	addr := os.Getenv("PROBED_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	root := &cobra.Command{
		Use:   "probectl",
		Short: "Control a probed health-probe engine",
		Long: `probectl talks to probed over gRPC: it applies target specs, shows targets
and their probes, triggers and resets probes, follows events and waits for
a target to become ready.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch o.output {
			case outputTable, outputJSON, outputYAML:
				return nil
			case outputWide:
				if cmd.Name() == "list" || cmd.Name() == "get" {
					return nil
				}
				return &usageError{fmt.Errorf("-o wide is for list and get; %s prints table, json or yaml", cmd.Name())}
			default:
				return &usageError{fmt.Errorf("unknown output format %q: want table, wide (list and get), json or yaml", o.output)}
			}
		},
	}
	root.SetOut(out)
	root.SetErr(errOut)
	f := root.PersistentFlags()
	f.StringVar(&o.addr, "addr", addr, "probed's gRPC address (env PROBED_ADDR)")
	f.StringVar(&o.caFile, "ca", "", "PEM file of the CA certificates that verify probed's certificate (enables TLS)")
	f.StringVar(&o.certFile, "cert", "", "PEM file of the client certificate, for mutual TLS (with --key)")
	f.StringVar(&o.keyFile, "key", "", "PEM file of the client certificate's key")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding a bearer token sent with every call")
	f.StringVarP(&o.output, "output", "o", outputTable, "output format: table, wide (list and get: more columns), json or yaml")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace: a NAME without '/' means NAMESPACE/NAME, and list and watch show only the namespace's targets")

	root.AddCommand(
		newApplyCommand(o),
		newGetCommand(o),
		newListCommand(o),
		newDeleteCommand(o),
		newTriggerCommand(o),
		newResetCommand(o),
		newWatchCommand(o),
		newWaitReadyCommand(o),
		newReplicasCommand(o),
	)
	markUsageErrors(root)
	return root
}

// qualify returns name in the namespace of -n: NAMESPACE/NAME for a
// name without '/', the name itself otherwise (or without -n).
func (o *rootOptions) qualify(name string) string {
	if o.namespace == "" || strings.Contains(name, "/") {
		return name
	}
	return o.namespace + "/" + name
}

// dial connects to probed as the global flags say. The caller must Close
// the client.
func (o *rootOptions) dial(ctx context.Context) (*client.Client, error) {
	var opts []client.Option
	if o.caFile != "" {
		opts = append(opts, client.WithTLS(o.caFile))
	}
	if o.certFile != "" || o.keyFile != "" {
		opts = append(opts, client.WithClientCert(o.certFile, o.keyFile))
	}
	if o.tokenFile != "" {
		opts = append(opts, client.WithTokenFile(o.tokenFile))
	}
	return client.Dial(ctx, o.addr, opts...)
}

// withClient runs fn with a client of probed.
func (o *rootOptions) withClient(cmd *cobra.Command, fn func(context.Context, *client.Client) error) error {
	ctx := cmd.Context()
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	return fn(ctx, c)
}

// printError prints err for a person: one line per field violation of an
// invalid request, the server's message otherwise.
func printError(w io.Writer, err error) {
	var inv *client.InvalidError
	switch {
	case errors.As(err, &inv) && len(inv.Violations) > 0:
		heading := "invalid request:"
		for _, v := range inv.Violations {
			if v.Field == "target" || strings.HasPrefix(v.Field, "target.") {
				heading = "invalid target:"
				break
			}
		}
		var b strings.Builder
		b.WriteString(heading + "\n")
		for _, v := range inv.Violations {
			fmt.Fprintf(&b, "  %s: %s\n", v.Field, v.Description)
		}
		_, _ = io.WriteString(w, b.String())
	case errors.Is(err, client.ErrUnavailable) && !strings.Contains(err.Error(), "cannot reach probed"):
		_, _ = fmt.Fprintf(w, "Error: cannot reach probed: %v\n", err)
	default:
		_, _ = fmt.Fprintf(w, "Error: %v\n", err)
	}
}
