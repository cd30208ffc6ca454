package main

import (
	"bytes"
	"testing"
)

func TestLastLine(t *testing.T) {
	tests := []struct {
		name, out, want string
	}{
		{"empty", "", ""},
		{"one line", `{"a":1}`, `{"a":1}`},
		{"trailing newline", "{\"a\":1}\n", `{"a":1}`},
		{"table then json", "table\n\nrow\n{\"a\":1}\n", `{"a":1}`},
		{"crlf", "x\r\n{\"a\":1}\r\n", `{"a":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(lastLine([]byte(tt.out))); got != tt.want {
				t.Errorf("lastLine(%q) = %q, want %q", tt.out, got, tt.want)
			}
		})
	}
}

func TestWriteJSONLine(t *testing.T) {
	var buf bytes.Buffer
	if err := writeJSONLine(&buf, map[string]int{"a": 1}); err != nil {
		t.Fatalf("writeJSONLine() = %v", err)
	}
	if got, want := buf.String(), "{\"a\":1}\n"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
}
