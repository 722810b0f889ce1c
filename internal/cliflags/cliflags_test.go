package cliflags

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

func TestParseFlagsOnly(t *testing.T) {
	for _, c := range []struct {
		args     []string
		code     int
		ok       bool
		inOutput string
	}{
		{nil, 0, true, ""},
		{[]string{"-n=3"}, 0, true, ""},
		{[]string{"-h"}, 0, false, "-n int"},
		{[]string{"--help"}, 0, false, "-n int"},
		{[]string{"-nope"}, ExitUsage, false, "flag provided but not defined: -nope"},
		{[]string{"-n=x"}, ExitUsage, false, "invalid value"},
		{[]string{"-n=3", "stray"}, ExitUsage, false, `tool: unexpected arguments ["stray"] (flags only; see -h)`},
	} {
		var out bytes.Buffer
		fs := flag.NewFlagSet("tool", flag.ContinueOnError)
		fs.SetOutput(&out)
		fs.Int("n", 0, "a number")
		code, ok := ParseFlagsOnly(fs, c.args)
		if code != c.code || ok != c.ok || !strings.Contains(out.String(), c.inOutput) {
			t.Errorf("ParseFlagsOnly(%q) = %d, %v, output %q; want %d, %v, output with %q", c.args, code, ok, out.String(), c.code, c.ok, c.inOutput)
		}
	}
}

// TestParseKeepsArguments: Parse leaves positional arguments to the main.
func TestParseKeepsArguments(t *testing.T) {
	fs := flag.NewFlagSet("tool", flag.ContinueOnError)
	if code, ok := Parse(fs, []string{"list", "go1.26"}); !ok || code != 0 || fs.NArg() != 2 {
		t.Fatalf("Parse = %d, %v with %d arguments; want 0, true, 2", code, ok, fs.NArg())
	}
}
