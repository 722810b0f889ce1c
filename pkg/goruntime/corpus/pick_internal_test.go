package corpus

import (
	"slices"
	"strings"
	"testing"
)

// TestPick: Only and Cases select cases by name, in the corpus's order,
// and a name in Cases that no case has is an error naming it (a renamed
// case must not drop out of a selection unseen).
func TestPick(t *testing.T) {
	all := func() []Case { return []Case{{Name: "exit_code"}, {Name: "hello"}, {Name: "panic_exit"}} }
	names := func(cs []Case) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	for _, tc := range []struct {
		opts RunOptions
		want []string
	}{
		{RunOptions{}, []string{"exit_code", "hello", "panic_exit"}},
		{RunOptions{Only: "exit"}, []string{"exit_code", "panic_exit"}},
		{RunOptions{Cases: []string{"panic_exit", "hello"}}, []string{"hello", "panic_exit"}},
		{RunOptions{Only: "exit", Cases: []string{"panic_exit", "hello"}}, []string{"panic_exit"}},
	} {
		got, err := tc.opts.pick(all())
		if err != nil || !slices.Equal(names(got), tc.want) {
			t.Errorf("%+v: pick = %v, %v; want %v", tc.opts, names(got), err, tc.want)
		}
	}
	if _, err := (RunOptions{Dir: "d", Cases: []string{"hello", "helo"}}).pick(all()); err == nil || !strings.Contains(err.Error(), `no case "helo" in d`) {
		t.Errorf("pick with an unknown name = %v, want an error naming it", err)
	}
}
