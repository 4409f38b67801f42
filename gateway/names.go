package gateway

import (
	"slices"
	"strings"
)

// known says which names exist, for an unknown one: "(the providers are
// a, b, c; did you mean b?)" — the nearest name within two edits, if any.
func known(what, name string, names []string) string {
	names = slices.Sorted(slices.Values(names))
	if len(names) == 0 {
		return "(there are no " + what + ")"
	}
	msg := "(the " + what + " are " + strings.Join(names, ", ")
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(name), strings.ToLower(n)); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best != "" {
		msg += "; did you mean " + best + "?"
	}
	return msg + ")"
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
