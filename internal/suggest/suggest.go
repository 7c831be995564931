// Package suggest holds the one edit distance floe uses for "did you mean"
// hints (spec field and column names, expression columns). It imports
// nothing of floe.
package suggest

// Distance returns the Levenshtein distance between a and b counted in
// runes: the fewest single-rune insertions, deletions and substitutions
// that turn a into b. It takes O(len(a)*len(b)) time and O(len(b)) memory;
// callers bound the lengths of untrusted input.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// maxLen bounds the names Closest compares: longer ones are never a typo
// worth suggesting, and the bound keeps Distance cheap on hostile input.
const maxLen = 64

// Closest returns the entry of candidates nearest to s by Distance when it
// is near enough to be a likely typo: at distance 1 to max(2, len(s)/3).
// It returns "" when none is (an exact match is not a typo). Strings longer
// than 64 bytes are never suggested or matched.
func Closest(s string, candidates []string) string {
	if len(s) > maxLen {
		return ""
	}
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if len(c) > maxLen {
			continue
		}
		if d := Distance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(2, len(s)/3)
	if bestD == 0 || bestD > limit {
		return ""
	}
	return best
}
