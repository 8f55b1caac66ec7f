// Package suggest finds the name a typo was meant to be: the one
// did-you-mean of the CLI's commands and flags and of the daemon's model
// prefixes, so that both guess alike. A leaf: the kaimon binary and the
// daemon both link it.
package suggest

import (
	"strings"

	"github.com/xrash/smetrics"
)

// Nearest returns the one of names nearest to name by Jaro-Winkler
// similarity (xrash/smetrics, as urfave/cli's own suggestions, whose
// message cannot be worded as ours) if it scores over near, else one that
// is name with two neighbouring letters swapped (Jaro-Winkler scores a
// swap in a short name, "rnu" for run, below a guess), else the one name
// that begins with name, of two letters or more (Jaro-Winkler scores "al"
// for all-hosts below a guess too: the letters it lacks outweigh the
// prefix), else "".
func Nearest(name string, names []string, near float64) string {
	best, score, swapped, prefixed, prefixes := "", near, "", "", 0
	for _, n := range names {
		if s := smetrics.JaroWinkler(name, n, 0.7, 4); s > score {
			best, score = n, s
		}
		if swapped == "" && adjacentSwap(name, n) {
			swapped = n
		}
		if len(name) >= 2 && len(n) > len(name) && strings.HasPrefix(n, name) && n != prefixed {
			prefixed, prefixes = n, prefixes+1
		}
	}
	switch {
	case best != "":
		return best
	case swapped != "":
		return swapped
	case prefixes == 1:
		return prefixed
	}
	return ""
}

// adjacentSwap says whether a is b with two neighbouring letters swapped.
func adjacentSwap(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
}
