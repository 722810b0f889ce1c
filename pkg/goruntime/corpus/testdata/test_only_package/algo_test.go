// A package made only of tests: agents send these to check an idea.
package algo

import (
	"slices"
	"testing"
)

func reverse[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

func isPalindrome(s string) bool {
	r := []rune(s)
	return slices.Equal(r, reverse(r))
}

func TestReverse(t *testing.T) {
	got := reverse([]int{1, 2, 3})
	if !slices.Equal(got, []int{3, 2, 1}) {
		t.Fatalf("reverse = %v", got)
	}
}

func TestPalindrome(t *testing.T) {
	for _, s := range []string{"", "a", "level", "été"} {
		if !isPalindrome(s) {
			t.Errorf("isPalindrome(%q) = false", s)
		}
	}
	if isPalindrome("sandbox") {
		t.Error("sandbox is not a palindrome")
	}
}
