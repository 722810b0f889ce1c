// Package bad has an off-by-one.
package bad

// Sum returns 1+2+...+n.
func Sum(n int) int {
	s := 0
	for i := 1; i < n; i++ {
		s += i
	}
	return s
}
