package server

import (
	"flag"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// parseArgs parses args as the server does, without an environment.
func parseArgs(t *testing.T, args []string) Flags {
	t.Helper()
	fs := flag.NewFlagSet("sandbox-server", flag.ContinueOnError)
	f := Defaults()
	RegisterFlags(fs, &f, func(string) (string, bool) { return "", false })
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("parse %q: left over %q", args, fs.Args())
	}
	return f
}

// settings is the part of Flags a command line carries: the exported
// fields, with each Seconds as its duration.
func settings(f Flags) map[string]any {
	m := map[string]any{}
	v := reflect.ValueOf(f)
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		x := v.Field(i).Interface()
		if s, ok := x.(Seconds); ok {
			x = s.D
		}
		m[sf.Name] = x
	}
	return m
}

// TestArgsRoundTrip: Flags -> Args -> the server's parse gives back every
// setting, for a Flags that differs from Defaults in every field (a field
// added to Flags and not to RegisterFlags, or not carried by Args, fails
// here), for Defaults (no arguments), and for values that need care on a
// command line (empty strings, -1, false, fractions of a second).
func TestArgsRoundTrip(t *testing.T) {
	all := Flags{
		Addr:              "unix:/run/x/server.sock",
		BaseDir:           "/work dir",
		ExecTimeout:       Seconds{D: 300 * time.Millisecond},
		MaxOutputBytes:    4096,
		MaxUploadBytes:    7,
		MaxCommandBytes:   9,
		Home:              "/home/h",
		Reap:              false,
		ShutdownTimeout:   Seconds{D: 90 * time.Second},
		LogLevel:          "debug",
		LogMaxBytes:       0,
		GRPCAddr:          "unix:/run/x/g.sock",
		RESTAddr:          "127.0.0.1:1",
		ProcessAPIBin:     "/bin/companion",
		ModuleRelayAddr:   "127.0.0.1:2",
		ModuleRelaySocket: "/run/x/mod.sock",
		OSThreads:         0,
		CommandGOMAXPROCS: 5,
		Init:              true,
		InitGuard:         true,
		IdleExitSeconds:   1800,
		GoTelemetry:       "off",
		LifelineFD:        3,
	}
	def := settings(Defaults())
	for name, v := range settings(all) {
		if reflect.DeepEqual(v, def[name]) {
			t.Fatalf("the test's Flags leaves %s at its default (%v): set it to another value", name, v)
		}
	}
	args := all.Args()
	if len(args) != len(def) {
		t.Errorf("Args gave %d arguments for %d changed fields: %q", len(args), len(def), args)
	}
	if got, want := settings(parseArgs(t, args)), settings(all); !reflect.DeepEqual(got, want) {
		t.Errorf("round trip through %q:\n got %v\nwant %v", args, got, want)
	}

	if args := Defaults().Args(); len(args) != 0 {
		t.Errorf("Defaults().Args() = %q, want none", args)
	}

	some := Defaults()
	some.Home, some.LifelineFD, some.ExecTimeout.D = "", -1, 1500*time.Millisecond
	some.Reap = false
	args = some.Args()
	if want := []string{"--exec-timeout=1.5", "--reap=false"}; !slices.Equal(args, want) {
		t.Errorf("Args = %q, want %q", args, want)
	}
	if got := parseArgs(t, args); !reflect.DeepEqual(settings(got), settings(some)) {
		t.Errorf("round trip through %q: got %v, want %v", args, settings(got), settings(some))
	}
	for _, a := range all.Args() {
		if !strings.HasPrefix(a, "--") || !strings.Contains(a, "=") {
			t.Errorf("argument %q is not --name=value", a)
		}
	}
}
