// Package good works.
package good

// Double returns 2n.
func Double(n int) int { return 2 * n }
