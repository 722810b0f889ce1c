package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "usage: toolchains"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"add"}, 2, "add needs at least one version"},
		{[]string{"add", "1.x"}, 1, `go version "1.x": want a release such as 1.25.9`},
		{[]string{"-h"}, 0, "usage: toolchains"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errb); code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}

func TestList(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"list"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "(default)") {
		t.Errorf("list: %q", out.String())
	}
}
