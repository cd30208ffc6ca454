package codec

import (
	"slices"
	"strings"

	storagev1 "github.com/probed/probed/proto/probed/storage/v1"
)

// labelsToProto returns m's entries in key order (so equal maps have equal
// bytes), nil for an empty map.
func labelsToProto(m map[string]string) []*storagev1.Label {
	if len(m) == 0 {
		return nil
	}
	ls := make([]storagev1.Label, len(m)) // one allocation for all
	out := make([]*storagev1.Label, 0, len(m))
	for k, v := range m {
		l := &ls[len(out)]
		l.Key, l.Value = k, v
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *storagev1.Label) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// labelsFromProto is the inverse of labelsToProto (a key given twice
// keeps its last value, as a protobuf map would); nil when there are none.
func labelsFromProto(ls []*storagev1.Label, what string) (map[string]string, error) {
	if len(ls) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		if err := known(l, what); err != nil {
			return nil, err
		}
		m[l.Key] = l.Value
	}
	return m, nil
}
