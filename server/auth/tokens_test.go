package auth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probed/probed/internal/testpki"
	"github.com/probed/probed/server/auth"
)

const (
	tokA = "aaaaaaaaaaaaaaaaaaaaaaaa"
	tokB = "bbbbbbbbbbbbbbbbbbbbbbbb"
	tokC = "cccccccccccccccccccccccc"
)

func TestParseTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		data    string
		want    int
		wantErr string
	}{
		{name: "names, comments and blank lines", data: "# ops\n" + tokA + " alice\n\n  " + tokB + "\tbob  \n" + tokC + "\n", want: 3},
		{name: "empty", data: "# nothing\n\n", wantErr: "no token"},
		{name: "short", data: "short alice\n", wantErr: "line 1: the token is shorter than 16 characters"},
		{name: "three fields", data: tokA + " alice extra\n", wantErr: "line 1: want a token and at most one name, found 3 fields"},
		{name: "twice", data: tokA + " alice\n" + tokA + " bob\n", wantErr: "line 2: the token of line 1 again"},
		{name: "not ASCII", data: tokA + "é alice\n", wantErr: "printable ASCII"},
		{name: "name not ASCII", data: tokA + " al\x01ce\n", wantErr: "the name must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, err := auth.ParseTokens([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTokens error = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), tokA) {
					t.Errorf("error %q quotes a token", err)
				}
				return
			}
			if err != nil || n != tt.want {
				t.Fatalf("ParseTokens = %d, %v; want %d tokens", n, err, tt.want)
			}
		})
	}
}

func TestTokensLookup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := testpki.WriteFile(t, dir, "tokens", []byte(tokA+" alice\n"+tokB+"\n"))
	toks, err := auth.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		token  string
		wantID string
		wantOK bool
	}{
		{token: tokA, wantID: "alice", wantOK: true},
		{token: tokB, wantID: "token-", wantOK: true}, // a hash prefix
		{token: tokA[:len(tokA)-1]},
		{token: tokA + "a"},
		{token: ""},
		{token: tokC},
	}
	for _, tt := range tests {
		id, ok := toks.Lookup(tt.token)
		if ok != tt.wantOK || !strings.HasPrefix(id, tt.wantID) || (!ok && id != "") {
			t.Errorf("Lookup(%q) = %q, %v; want %q..., %v", tt.token, id, ok, tt.wantID, tt.wantOK)
		}
	}
	id1, _ := toks.Lookup(tokB)
	if len(id1) != len("token-")+12 {
		t.Errorf("default identity %q: want token- and 12 hex digits", id1)
	}
}

func TestTokensReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := testpki.WriteFile(t, dir, "tokens", []byte(tokA+" alice\n"))
	toks, err := auth.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := toks.Reload(); changed || err != nil {
		t.Fatalf("Reload of an unchanged file = %v, %v; want false, nil", changed, err)
	}

	// Rotation: B replaces A.
	testpki.WriteFile(t, dir, "tokens", []byte(tokB+" bob\n"))
	if changed, err := toks.Reload(); !changed || err != nil {
		t.Fatalf("Reload after a change = %v, %v; want true, nil", changed, err)
	}
	if _, ok := toks.Lookup(tokA); ok {
		t.Error("the removed token is still accepted")
	}
	if id, ok := toks.Lookup(tokB); !ok || id != "bob" {
		t.Errorf("Lookup(new token) = %q, %v; want bob", id, ok)
	}

	// A broken file keeps the last good tokens and is reported once.
	testpki.WriteFile(t, dir, "tokens", []byte("short\n"))
	if _, err := toks.Reload(); err == nil {
		t.Fatal("Reload of a broken file: no error")
	}
	if changed, err := toks.Reload(); changed || err != nil {
		t.Fatalf("second Reload of the same broken file = %v, %v; want false, nil (reported once)", changed, err)
	}
	if _, ok := toks.Lookup(tokB); !ok {
		t.Error("a broken file dropped the previous tokens")
	}

	// A missing file too.
	if err := os.Remove(filepath.Join(dir, "tokens")); err != nil {
		t.Fatal(err)
	}
	if _, err := toks.Reload(); err == nil {
		t.Fatal("Reload of a missing file: no error")
	}
	if _, ok := toks.Lookup(tokB); !ok {
		t.Error("a missing file dropped the previous tokens")
	}
	testpki.WriteFile(t, dir, "tokens", []byte(tokC+" carol\n"))
	if changed, err := toks.Reload(); !changed || err != nil {
		t.Fatalf("Reload after the fix = %v, %v; want true, nil", changed, err)
	}
	if id, ok := toks.Lookup(tokC); !ok || id != "carol" {
		t.Errorf("Lookup = %q, %v; want carol", id, ok)
	}
}

func TestLoadTokensErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := auth.LoadTokens(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadTokens(missing file): no error")
	}
	path := testpki.WriteFile(t, dir, "tokens", []byte("\n"))
	if _, err := auth.LoadTokens(path); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Errorf("LoadTokens(empty file) = %v, want no token", err)
	}
}
