package setup

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	fmt.Println("setup: creating fixtures")
	code := m.Run()
	fmt.Println("teardown: tests returned", code)
	if code == 0 {
		fmt.Println("teardown: fixture left behind, failing the run")
		code = 4
	}
	os.Exit(code)
}

func TestOne(t *testing.T) {}
