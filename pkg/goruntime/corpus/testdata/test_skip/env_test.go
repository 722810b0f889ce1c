package env

import (
	"os"
	"runtime"
	"testing"
)

func TestNeedsDatabase(t *testing.T) {
	if os.Getenv("CORPUS_DATABASE_URL") == "" {
		t.Skip("CORPUS_DATABASE_URL not set")
	}
	t.Fatal("should have been skipped")
}

func TestOnlyOnPlan9(t *testing.T) {
	if runtime.GOOS != "plan9" {
		t.Skipf("GOOS is %s", runtime.GOOS)
	}
}

func TestRuns(t *testing.T) {
	t.Log("this one runs")
}

func TestShort(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode")
	}
	t.Error("-short was given, so this should not run")
}
