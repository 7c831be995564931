// Package keygroup is the one definition of floe's key-group rules: how a
// serialised key maps to a key group, how key groups map to subtasks, which
// contiguous range of key groups a subtask owns, and the bounds on the
// key-group count. It imports nothing of floe, so that every package that
// needs these rules (manifest validation, the operators, the spec, the
// engine) uses the same ones.
//
// # The rules
//
// A pipeline has K key groups (its max_parallelism, 1 <= K <= [Max], default
// [Default]), fixed for its life. A key's group is fnv1a64(key bytes) mod K
// ([Of]). At parallelism P (1 <= P <= K) key group g belongs to subtask
// g*P/K ([SubtaskOf]), so subtask s owns exactly the contiguous range
// [ceil(s*K/P), ceil((s+1)*K/P)) ([Range]). For every 1 <= P <= K the ranges
// of subtasks 0..P-1 are non-empty and partition [0, K) in order; the tests
// check this, and that SubtaskOf agrees with Range, for many P and K.
//
// These rules decide where state lives: changing any of them moves keys to
// other subtasks and breaks the restore of committed state. They are frozen.
package keygroup

// Max is the largest supported key-group count (max_parallelism).
const Max = 1 << 15

// Default is the key-group count of a pipeline that does not set one.
const Default = 128

// Hash is FNV-1a 64 of b (hash/fnv New64a semantics), inlined so that it
// costs no allocation or interface call. It is part of the frozen format.
func Hash(b []byte) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime64
	}
	return h
}

// Of returns the key group of a serialised key among k key groups:
// Hash(key) mod k. It returns 0 when k < 1.
func Of(key []byte, k int) int {
	if k < 1 {
		return 0
	}
	return int(Hash(key) % uint64(k))
}

// SubtaskOf returns the subtask owning key group g at parallelism p with k
// key groups: g*p/k. It returns 0 when k < 1. For 0 <= g < k and p >= 1 the
// result is in [0, p).
func SubtaskOf(g, p, k int) int {
	if k < 1 {
		return 0
	}
	return int(int64(g) * int64(p) / int64(k))
}

// Range returns the contiguous key groups [lo, hi) owned by subtask at
// parallelism p with k key groups: g is in it exactly when
// SubtaskOf(g, p, k) == subtask. It returns the empty range 0, 0 for
// arguments out of domain (p < 1, k < 1, subtask outside [0, p)); when
// p > k some subtasks own nothing and get an empty range (lo == hi), which
// is why callers keep p <= k.
func Range(subtask, p, k int) (lo, hi int) {
	if p < 1 || k < 1 || subtask < 0 || subtask >= p {
		return 0, 0
	}
	// g*p/k == s  <=>  s*k <= g*p < (s+1)*k  <=>  ceil(s*k/p) <= g < ceil((s+1)*k/p)
	ceil := func(s int) int { return int((int64(s)*int64(k) + int64(p) - 1) / int64(p)) }
	return ceil(subtask), ceil(subtask + 1)
}

// ValidCount reports whether k is a supported key-group count: 1 <= k <= Max.
func ValidCount(k int) bool { return k >= 1 && k <= Max }
