package calc

// Add adds.
func Add(a, b int) int {
	return "sum"
}
