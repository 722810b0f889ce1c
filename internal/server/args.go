package server

import "flag"

// Args is the command line that sets every field of f that differs from
// Defaults: one "--name=value" argument each, in name order, named as RegisterFlags
// registers them (so the names are spelled once, there). A program that
// starts a runtime server builds its Flags and passes Args, instead of
// spelling the server's flags by hand. Fields at their default are left
// out: the started server takes them from its environment, as it would
// without the flag, and from Defaults when the environment says nothing.
func (f Flags) Args() []string {
	given := registered(f)
	defaults := registered(Defaults())
	var args []string
	given.VisitAll(func(fl *flag.Flag) {
		if v := fl.Value.String(); v != defaults.Lookup(fl.Name).Value.String() {
			args = append(args, "--"+fl.Name+"="+v)
		}
	})
	return args
}

// registered is a FlagSet holding f's flags, without the environment.
func registered(f Flags) *flag.FlagSet {
	fs := flag.NewFlagSet("sandbox-server", flag.ContinueOnError)
	RegisterFlags(fs, &f, func(string) (string, bool) { return "", false })
	return fs
}
