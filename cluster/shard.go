package cluster

// shardOf is fnv-1a (32 bits) of name modulo shards.
func shardOf(name string, shards int) int {
	const (
		offset = 2166136261
		prime  = 16777619
	)
	h := uint32(offset)
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= prime
	}
	return int(h % uint32(shards))
}
