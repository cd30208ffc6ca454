package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// runChild runs this binary again with args (normally a hidden subcommand
// and its flags), passing its stderr through, and decodes the last line it
// prints on stdout, which must be one JSON value, into v. A child runs
// alone, so what it measures about itself is not mixed with the parent or
// with other children.
func runChild(ctx context.Context, stderr io.Writer, v any, args ...string) error {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout = &stdout
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("child %q: %w", args, err)
	}
	line := lastLine(stdout.Bytes())
	if len(line) == 0 {
		return fmt.Errorf("child %q printed nothing", args)
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("child %q: decoding %q: %w", args, line, err)
	}
	return nil
}

// lastLine returns the last non-empty line of out, without its newline.
func lastLine(out []byte) []byte {
	out = bytes.TrimRight(out, "\r\n")
	if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	return bytes.TrimSpace(out)
}

// writeJSONLine writes v as one line of JSON, the way a child reports to
// its parent (and the parent to a script).
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
