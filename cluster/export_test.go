package cluster

import "slices"

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
