package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// This file parses target specs: YAML or JSON in probe.v1's JSON form.

var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// parseTargets parses YAML (or JSON, which is YAML) documents holding a
// target or a list of targets, and returns them with the source of each
// (source, with the document's number when there are several). Every
// problem is reported: unknown fields are errors naming their path
// ("target.readinessProbe: unknown field ...").
func parseTargets(source string, data []byte) (targets []*probev1.Target, sources []string, err error) {
	desc := (&probev1.Target{}).ProtoReflect().Descriptor()
	var errs []error
	docs := documentSeparator.Split(string(data), -1)
	for i, doc := range docs {
		where := source
		if len(docs) > 1 {
			where = fmt.Sprintf("%s (document %d)", source, i+1)
		}
		items, list, err := parseDocument(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		for k, item := range items {
			if item == nil {
				continue // an empty document
			}
			path := "target"
			if list {
				path = fmt.Sprintf("[%d]", k)
			}
			t, problems := parseTarget(item, desc, path)
			for _, p := range problems {
				errs = append(errs, fmt.Errorf("%s: %w", where, p))
			}
			if t != nil {
				targets = append(targets, t)
				sources = append(sources, where)
			}
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	if len(targets) == 0 {
		return nil, nil, fmt.Errorf("%s: no target in it", source)
	}
	return targets, sources, nil
}

// parseDocument returns the items of one YAML document: its value, or
// the elements of a list (list is then true).
func parseDocument(doc string) (items []any, list bool, err error) {
	j, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		return nil, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber() // keep integers exact
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, err
	}
	if l, ok := v.([]any); ok {
		return l, true, nil
	}
	return []any{v}, false, nil
}

// parseTarget returns the target in item (at path), or every problem
// with it.
func parseTarget(item any, desc protoreflect.MessageDescriptor, path string) (*probev1.Target, []error) {
	if _, ok := item.(map[string]any); !ok {
		return nil, []error{fmt.Errorf("%s: want an object, got %s", path, jsonType(item))}
	}
	if unknown := checkFields(item, desc, path); len(unknown) > 0 {
		return nil, unknown
	}
	b, err := json.Marshal(item)
	if err != nil {
		return nil, []error{err}
	}
	t := &probev1.Target{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(b, t); err != nil {
		return nil, []error{fmt.Errorf("%s: %s", path, protoErrorText(err))}
	}
	return t, nil
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

// checkFields reports every field of v that md does not have (in path
// order), by its path, suggesting the closest name. Values of the wrong
// type are left to protojson.
func checkFields(v any, md protoreflect.MessageDescriptor, path string) []error {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var errs []error
	fields := md.Fields()
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByTextName(key)
		}
		if fd == nil {
			errs = append(errs, unknownField(path, key, fields))
			continue
		}
		child := path + "." + fd.JSONName()
		val := obj[key]
		switch {
		case fd.IsMap():
			if vd := fd.MapValue().Message(); vd != nil {
				m, _ := val.(map[string]any)
				for _, k := range slices.Sorted(maps.Keys(m)) {
					errs = append(errs, checkFields(m[k], vd, fmt.Sprintf("%s[%s]", child, k))...)
				}
			}
		case fd.IsList():
			if fd.Message() != nil {
				l, _ := val.([]any)
				for i, e := range l {
					errs = append(errs, checkFields(e, fd.Message(), fmt.Sprintf("%s[%d]", child, i))...)
				}
			}
		case fd.Message() != nil && !strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf."):
			errs = append(errs, checkFields(val, fd.Message(), child)...)
		}
	}
	return errs
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
