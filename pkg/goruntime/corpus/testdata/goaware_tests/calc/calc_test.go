package calc

import (
	"fmt"
	"testing"
)

func Double(x int) int { return 2 * x }

func TestDouble(t *testing.T) {
	t.Run("two", func(t *testing.T) { t.Log("fine") })
	t.Run("wrong want", func(t *testing.T) {
		fmt.Println("printed by the subtest")
		t.Errorf("Double(2) = %d, want 5", Double(2))
	})
}

func TestSkipped(t *testing.T) { t.Skip("not on this machine") }

func TestPasses(t *testing.T) {}
