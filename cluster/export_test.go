package cluster

import (
	"fmt"
	"slices"
)

// Desired is the owner of each shard when every one of ids is eligible.
func Desired(ids []string, shards int) []string {
	ids = slices.Sorted(slices.Values(ids))
	seeds := make([]uint64, len(ids))
	for i, id := range ids {
		seeds[i] = seed(id)
	}
	owners := make([]string, shards)
	for s := range owners {
		owners[s] = ids[pick(seeds, s)]
	}
	return owners
}

// OwnersDiff describes how the owners got differ from want, or "".
func OwnersDiff(got, want []string) string {
	var diffs []string
	for s := range want {
		if got[s] != want[s] {
			diffs = append(diffs, fmt.Sprintf("shard %d: %q, want %q", s, got[s], want[s]))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("%d shards differ, first %v", len(diffs), diffs[:min(3, len(diffs))])
}
