package greet

import "testing"

func TestHello(t *testing.T) {
	if got, want := Hello("Alice"), "Hello, Alice!"; got != want {
		t.Fatalf("Hello(%q) = %q, want %q", "Alice", got, want)
	}
}
