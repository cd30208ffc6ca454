// Package field names fields of API objects and collects validation errors
// about them, so that every problem in a request can be reported at once with
// the JSON path of the field it concerns (e.g.
// "target.readinessProbe.periodMilliseconds").
package field

import (
	"strconv"
	"strings"
)

// Path is the JSON path of a field. The zero value and nil are the root.
// Paths are immutable: Child, Index and Key return new paths.
type Path struct {
	parent *Path
	elem   string // ".name", "[3]" or "[key]"
}

// NewPath returns the path of a top-level field.
func NewPath(name string) *Path {
	return &Path{elem: name}
}

// Child returns the path of the named field inside p.
func (p *Path) Child(name string) *Path {
	if p == nil || (p.parent == nil && p.elem == "") {
		return NewPath(name)
	}
	return &Path{parent: p, elem: "." + name}
}

// Index returns the path of the i-th element of the list at p.
func (p *Path) Index(i int) *Path {
	return &Path{parent: p, elem: "[" + strconv.Itoa(i) + "]"}
}

// Key returns the path of the map entry k of the map at p: "[app]" for a
// key of letters, digits and "-_./", else the key quoted (control
// characters escaped) and clipped to MaxEchoBytes, as a value is, so a
// hostile key cannot drive a terminal nor make the error long.
func (p *Path) Key(k string) *Path {
	if k == "" || len(k) > MaxEchoBytes || strings.ContainsFunc(k, func(r rune) bool { return !plainKeyRune(r) }) {
		return &Path{parent: p, elem: "[" + quote(k) + "]"}
	}
	return &Path{parent: p, elem: "[" + k + "]"}
}

func plainKeyRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-_./", r)
}

// String renders the path, e.g. "target.readinessProbe.httpGet.httpHeaders[0].name".
func (p *Path) String() string {
	if p == nil {
		return ""
	}
	var elems []string
	for q := p; q != nil; q = q.parent {
		elems = append(elems, q.elem)
	}
	var b strings.Builder
	for i := len(elems) - 1; i >= 0; i-- {
		b.WriteString(elems[i])
	}
	return b.String()
}
