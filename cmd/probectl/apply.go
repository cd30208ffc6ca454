package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func newApplyCommand(o *rootOptions) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create targets, or update them when they exist, from a JSON or YAML spec",
		Long: `Apply creates each target of FILE, or replaces its spec when a target by
its name exists. FILE holds a target in probe.v1's JSON form (lowerCamelCase
field names), as JSON or YAML; several YAML documents separated by "---", or
a list, apply several targets. "-" reads standard input. A field name that
does not exist is an error.`,
		Example: `  cat <<EOF | probectl apply -f -
  name: web
  labels: {app: web}
  readinessProbe:
    httpGet: {host: 127.0.0.1, port: 8080, path: /healthz}
    periodSeconds: 1
    periodMilliseconds: -900
  EOF`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			source, data, err := readSpec(cmd.InOrStdin(), file)
			if err != nil {
				return err
			}
			targets, err := parseTargets(source, data)
			if err != nil {
				return err
			}
			return o.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				return apply(ctx, c, cmd.OutOrStdout(), o.output, targets)
			})
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", `file holding the target spec(s), JSON or YAML; "-" for standard input`)
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func apply(ctx context.Context, c *client.Client, w io.Writer, format string, targets []*probev1.Target) error {
	applied := make([]*probev1.Target, 0, len(targets))
	for _, t := range targets {
		got, created, err := c.Apply(ctx, t)
		if err != nil {
			return err
		}
		if format == outputTable {
			verb := "configured"
			if created {
				verb = "created"
			}
			if _, err := fmt.Fprintf(w, "target/%s %s\n", got.GetName(), verb); err != nil {
				return err
			}
		}
		applied = append(applied, got)
	}
	if format == outputTable {
		return nil
	}
	return printTargets(w, format, time.Time{}, applied, true)
}

// readSpec reads file, or in when file is "-".
func readSpec(in io.Reader, file string) (source string, data []byte, err error) {
	if file == "-" {
		data, err = io.ReadAll(in)
		return "stdin", data, err
	}
	data, err = os.ReadFile(file)
	return file, data, err
}

var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// parseTargets parses YAML (or JSON, which is YAML) documents holding a
// target or a list of targets. Unknown fields are errors naming their path
// ("target.readinessProbe: unknown field ...").
func parseTargets(source string, data []byte) ([]*probev1.Target, error) {
	desc := (&probev1.Target{}).ProtoReflect().Descriptor()
	var targets []*probev1.Target
	docs := documentSeparator.Split(string(data), -1)
	for i, doc := range docs {
		where := source
		if len(docs) > 1 {
			where = fmt.Sprintf("%s (document %d)", source, i+1)
		}
		j, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.UseNumber() // keep integers exact
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		items, isList := v.([]any)
		if !isList {
			items = []any{v}
		}
		for k, item := range items {
			if item == nil {
				continue // an empty document
			}
			path := "target"
			if isList {
				path = fmt.Sprintf("[%d]", k)
			}
			if _, ok := item.(map[string]any); !ok {
				return nil, fmt.Errorf("%s: %s: want an object, got %s", where, path, jsonType(item))
			}
			if err := checkFields(item, desc, path); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			b, err := json.Marshal(item)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			t := &probev1.Target{}
			if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(b, t); err != nil {
				return nil, fmt.Errorf("%s: %s: %s", where, path, protoErrorText(err))
			}
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("%s: no target in it", source)
	}
	return targets, nil
}

// protoErrorPrefix is what protojson puts before its messages; the line
// and column refer to the JSON made from the YAML, not to the file.
var protoErrorPrefix = regexp.MustCompile(`^proto:[\s\x{00a0}]*(\(line \d+:\d+\):[\s\x{00a0}]*)?`)

func protoErrorText(err error) string {
	return protoErrorPrefix.ReplaceAllString(err.Error(), "")
}

func jsonType(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// errUnknownField marks checkFields' errors.
var errUnknownField = errors.New("unknown field")

// checkFields reports the first field of v (in path order) that md does
// not have, by its path, suggesting the closest name. Values of the wrong
// type are left to protojson.
func checkFields(v any, md protoreflect.MessageDescriptor, path string) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	fields := md.Fields()
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByTextName(key)
		}
		if fd == nil {
			return unknownField(path, key, fields)
		}
		child := path + "." + fd.JSONName()
		val := obj[key]
		switch {
		case fd.IsMap():
			if vd := fd.MapValue().Message(); vd != nil {
				m, _ := val.(map[string]any)
				for _, k := range slices.Sorted(maps.Keys(m)) {
					if err := checkFields(m[k], vd, fmt.Sprintf("%s[%s]", child, k)); err != nil {
						return err
					}
				}
			}
		case fd.IsList():
			if fd.Message() != nil {
				l, _ := val.([]any)
				for i, e := range l {
					if err := checkFields(e, fd.Message(), fmt.Sprintf("%s[%d]", child, i)); err != nil {
						return err
					}
				}
			}
		case fd.Message() != nil && !strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf."):
			if err := checkFields(val, fd.Message(), child); err != nil {
				return err
			}
		}
	}
	return nil
}

func unknownField(path, key string, fields protoreflect.FieldDescriptors) error {
	best, bestDist := "", len(key)/2+2
	for i := range fields.Len() {
		name := fields.Get(i).JSONName()
		if d := editDistance(strings.ToLower(key), strings.ToLower(name)); d < bestDist {
			best, bestDist = name, d
		}
	}
	if best != "" {
		return fmt.Errorf("%s: %w %q (did you mean %q?)", path, errUnknownField, key, best)
	}
	return fmt.Errorf("%s: %w %q", path, errUnknownField, key)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
