package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// MinTokenBytes is the shortest token a token file may hold: shorter ones
// are guessable.
const MinTokenBytes = 16

// maxNameBytes bounds an identity's name (it is logged and stored as the
// owner of targets).
const maxNameBytes = 253

// tokenSet is one parsed token file. It keeps only hashes of the tokens.
type tokenSet struct {
	hashes [][sha256.Size]byte
	names  []string // identity of hashes[i]
}

// ParseTokens reads a token file: one token per line, optionally followed
// by white space and the name of the identity it grants; blank lines and
// lines starting with # are ignored. A token without a name grants the
// identity "token-" + the first 12 hex digits of its SHA-256. Tokens are
// at least MinTokenBytes printable ASCII characters; a token listed twice
// is an error (it could not grant two identities). It returns the number
// of tokens.
func ParseTokens(data []byte) (n int, err error) {
	s, err := parseTokens(data)
	if err != nil {
		return 0, err
	}
	return len(s.hashes), nil
}

func parseTokens(data []byte) (*tokenSet, error) {
	s := &tokenSet{}
	seen := make(map[[sha256.Size]byte]int)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 64<<10)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		tok := fields[0]
		switch {
		case len(fields) > 2:
			return nil, fmt.Errorf("line %d: want a token and at most one name, found %d fields", line, len(fields))
		case len(tok) < MinTokenBytes:
			return nil, fmt.Errorf("line %d: the token is shorter than %d characters", line, MinTokenBytes)
		case !printable(tok):
			return nil, fmt.Errorf("line %d: the token has characters other than printable ASCII", line)
		}
		h := sha256.Sum256([]byte(tok))
		name := "token-" + hex.EncodeToString(h[:6])
		if len(fields) == 2 {
			name = fields[1]
			if len(name) > maxNameBytes || !printable(name) {
				return nil, fmt.Errorf("line %d: the name must be at most %d printable ASCII characters", line, maxNameBytes)
			}
		}
		if prev, ok := seen[h]; ok {
			return nil, fmt.Errorf("line %d: the token of line %d again", line, prev)
		}
		seen[h] = line
		s.hashes = append(s.hashes, h)
		s.names = append(s.names, name)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(s.hashes) == 0 {
		return nil, errors.New("no token in the file")
	}
	return s, nil
}

func printable(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// lookup returns the identity tok grants. It compares SHA-256 hashes (so
// the time taken does not depend on the tokens' lengths) with
// subtle.ConstantTimeCompare, against every token, without stopping at a
// match.
func (s *tokenSet) lookup(tok string) (string, bool) {
	h := sha256.Sum256([]byte(tok))
	found := -1
	for i := range s.hashes {
		eq := subtle.ConstantTimeCompare(h[:], s.hashes[i][:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return "", false
	}
	return s.names[found], true
}

// Tokens are the bearer tokens of a token file (--auth-token-file), reread
// by Reload when the file changes. It is safe for concurrent use.
type Tokens struct {
	path  string
	set   atomic.Pointer[tokenSet]
	stamp stamps // used by Reload only

	mu      sync.Mutex
	changed chan struct{} // closed when the tokens change; guarded by mu
}

// LoadTokens reads the token file at path (see ParseTokens).
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path, changed: make(chan struct{})}
	st, err := stat(path)
	if err != nil {
		return nil, err
	}
	if err := t.load(); err != nil {
		return nil, err
	}
	t.stamp.current = []stamp{st}
	return t, nil
}

func (t *Tokens) load() error {
	data, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	s, err := parseTokens(data)
	if err != nil {
		return fmt.Errorf("token file %s: %w", t.path, err)
	}
	t.set.Store(s)
	t.mu.Lock()
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
	return nil
}

// Changed returns a channel that is closed the next time the tokens
// change (a reload), for calls that outlive a revocation (Watch).
func (t *Tokens) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// Lookup returns the identity token grants, and false for an unknown
// token.
func (t *Tokens) Lookup(token string) (identity string, ok bool) {
	return t.set.Load().lookup(token)
}

// Reload rereads the token file if it changed since the last load. A file
// that cannot be read or parsed leaves the tokens as they were and is
// reported once (Reload tries again when the file changes again).
func (t *Tokens) Reload() (changed bool, err error) {
	return t.stamp.reload([]string{t.path}, t.load)
}

// String names the file, for logs.
func (t *Tokens) String() string { return "token file " + t.path }
