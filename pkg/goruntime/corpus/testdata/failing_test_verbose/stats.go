// Package stats has a bug its tests catch: Median of an even-length slice.
package stats

import "slices"

// Mean returns the arithmetic mean of xs, 0 for none.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// Median returns the middle value of xs (bug: ignores even lengths).
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
