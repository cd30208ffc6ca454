package engine

import (
	"maps"

	"github.com/google/btree"
)

// labelIndex holds the published targets by label: for each label (key
// and value) the targets carrying it, in name order, so that a list with
// a label selector visits the targets of its rarest label rather than the
// whole registry. Not safe for concurrent use; the feed's lock guards it.
type labelIndex struct {
	byLabel map[label]*btree.BTreeG[*record]
	// free is shared by every label's tree: a tree of its own would
	// allocate a free list per label, and many labels have one target.
	free *btree.FreeListG[*record]
}

// label is one key and value of a target's labels.
type label struct{ key, value string }

// labelDegree keeps a label's tree small: most labels have few targets.
const labelDegree = 4

func newLabelIndex() labelIndex {
	return labelIndex{byLabel: make(map[label]*btree.BTreeG[*record]), free: btree.NewFreeListG[*record](btree.DefaultFreeListSize)}
}

// replace records that the published target named like t is now t (old
// before, nil when it is new; t nil when it is gone).
func (x *labelIndex) replace(old, t *record) {
	if old != nil {
		for k, v := range old.spec.Labels {
			if t != nil {
				if nv, ok := t.spec.Labels[k]; ok && nv == v {
					continue // kept: replaced below
				}
			}
			l := label{k, v}
			if tr := x.byLabel[l]; tr != nil {
				tr.Delete(old)
				if tr.Len() == 0 {
					delete(x.byLabel, l)
				}
			}
		}
	}
	if t == nil {
		return
	}
	for k, v := range t.spec.Labels {
		l := label{k, v}
		tr := x.byLabel[l]
		if tr == nil {
			tr = btree.NewWithFreeListG(labelDegree, byName, x.free)
			x.byLabel[l] = tr
		}
		tr.ReplaceOrInsert(t)
	}
}

// smallest returns the tree of the selector's label with the fewest
// targets; ok is false when the selector is empty. A nil tree with ok
// means a label no target has: nothing matches.
func (x *labelIndex) smallest(selector map[string]string) (tr *btree.BTreeG[*record], ok bool) {
	for k, v := range selector {
		t := x.byLabel[label{k, v}]
		if t == nil {
			return nil, true
		}
		if tr == nil || t.Len() < tr.Len() {
			tr = t
		}
	}
	return tr, tr != nil
}

// equal returns the labels of an indexed target equal to labels, if it
// finds one: it looks at the first and the last target (by name) of each
// of labels' trees, so a set that many targets share is found at once.
func (x *labelIndex) equal(labels map[string]string) (map[string]string, bool) {
	for k, v := range labels {
		tr := x.byLabel[label{k, v}]
		if tr == nil {
			return nil, false // a label no target has: no equal set
		}
		for _, end := range [...]func() (*record, bool){tr.Min, tr.Max} {
			if r, ok := end(); ok && maps.Equal(r.spec.Labels, labels) {
				return r.spec.Labels, true
			}
		}
	}
	return nil, false
}
