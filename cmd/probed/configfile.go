package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// notInFile are the flags a configuration file cannot set: they are about
// this run of the command, not about probed.
var notInFile = map[string]bool{"config": true, "print-config": true, "version": true, "help": true, "h": true}

// applyConfigFile sets the flags of fs that the command line did not set
// from the YAML file at path, whose keys are the flags' names
// (`metrics-addr: 127.0.0.1:9464`). Every flag of fs is accepted, whoever
// registered it. A value is what the flag takes on the command line; a
// list is joined with commas (`allow-targets: [10.0.0.0/8, ...]`) and a
// map becomes key=value pairs (`feature-gates: {SubSecondProbes: true}`).
// A null value (`max-watchers-per-client: ~`) leaves the flag at its
// default. An unknown key, a key given twice (at any depth: the file
// says one thing once), or a value the flag rejects, is an error naming
// the file and the key; every one is reported.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return fmt.Errorf("--config %s: %s", path, strictError(err))
	}
	var values map[string]any
	d := json.NewDecoder(strings.NewReader(string(j)))
	d.UseNumber()
	if err := d.Decode(&values); err != nil {
		return fmt.Errorf("--config %s: want a map of flag names to values: %w", path, err)
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(values)) {
		if fs.Lookup(key) == nil || notInFile[key] {
			errs = append(errs, fmt.Errorf("--config %s: %q is not a flag of probed%s", path, key, suggestFlag(fs, key)))
			continue
		}
		if onCommandLine[key] || values[key] == nil {
			continue // the command line wins; null keeps the default
		}
		v, err := flagText(values[key])
		if err == nil {
			err = fs.Set(key, v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--config %s: %s: %w", path, key, err))
		}
	}
	return errors.Join(errs...)
}

// strictError is the text of a strict YAML decoder's error, a key given
// twice said so: `line 3: key "addr" given twice (each key once: which
// one was meant?)`.
func strictError(err error) string {
	msg := strings.TrimSpace(strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:"))
	return strings.ReplaceAll(msg, "already set in map", "given twice (each key once: which one was meant?)")
}

// flagText is a YAML value as the command line would give it.
func flagText(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case json.Number:
		return v.String(), nil
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			s, err := flagText(e)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			s, err := flagText(v[k])
			if err != nil {
				return "", err
			}
			parts = append(parts, k+"="+s)
		}
		return strings.Join(parts, ","), nil
	default:
		return "", fmt.Errorf("unsupported value %v", v)
	}
}

// suggestFlag returns `; did you mean "X"?` for the flag name closest to
// key, or "".
func suggestFlag(fs *flag.FlagSet, key string) string {
	best, bestDist := "", 4
	fs.VisitAll(func(f *flag.Flag) {
		if d := levenshtein(key, f.Name); d < bestDist && !notInFile[f.Name] {
			best, bestDist = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// effectiveConfig is the configuration file that sets every flag of fs
// to its value now: what --print-config prints. Booleans and integers are
// YAML's, everything else a string, as --config reads it.
func effectiveConfig(fs *flag.FlagSet) ([]byte, error) {
	values := map[string]any{}
	fs.VisitAll(func(f *flag.Flag) {
		if notInFile[f.Name] {
			return
		}
		s := f.Value.String()
		if s == "" && f.DefValue == "" {
			// Unset, and with a default computed from other flags (such
			// as --max-watchers-per-client) or none: null keeps it so.
			values[f.Name] = nil
			return
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			if b, err := strconv.ParseBool(s); err == nil {
				values[f.Name] = b
				return
			}
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			values[f.Name] = n
			return
		}
		values[f.Name] = s
	})
	b, err := yaml.Marshal(values)
	if err != nil {
		return nil, err
	}
	return append([]byte("# probed's effective configuration (probed --print-config): a --config file\n"), b...), nil
}
