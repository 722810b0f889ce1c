package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// defaultPath is PATH for commands when the server was started without one.
const defaultPath = "/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// commandEnv builds the environment every command starts from: environ
// with HOME, GOPATH, GOMODCACHE and GOCACHE each set to a writable
// directory (kept when environ's value already is one, otherwise derived
// from fallbackHome and created) and PATH set when missing. It returns the
// directories it had to choose, for the startup log.
func commandEnv(environ []string, fallbackHome string) ([]string, map[string]string, error) {
	vars := make(map[string]string, len(environ))
	var order []string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if _, seen := vars[k]; !seen {
			order = append(order, k)
		}
		vars[k] = v
	}
	chosen := make(map[string]string)
	set := func(k, v string) {
		if _, seen := vars[k]; !seen {
			order = append(order, k)
		}
		vars[k] = v
		chosen[k] = v
	}
	ensure := func(k, derived string) error {
		if cur := vars[k]; cur != "" && filepath.IsAbs(cur) && writableDir(cur) == nil {
			return nil
		}
		if err := writableDir(derived); err != nil {
			return fmt.Errorf("prepare %s=%s: %w", k, derived, err)
		}
		set(k, derived)
		return nil
	}
	if err := ensure("HOME", fallbackHome); err != nil {
		return nil, nil, err
	}
	home := vars["HOME"]
	if err := ensure("GOPATH", filepath.Join(home, "go")); err != nil {
		return nil, nil, err
	}
	// GOPATH may be a list; the go command uses its first entry.
	gopath, _, _ := strings.Cut(vars["GOPATH"], string(os.PathListSeparator))
	if err := ensure("GOMODCACHE", filepath.Join(gopath, "pkg", "mod")); err != nil {
		return nil, nil, err
	}
	if err := ensure("GOCACHE", filepath.Join(home, ".cache", "go-build")); err != nil {
		return nil, nil, err
	}
	if vars["PATH"] == "" {
		set("PATH", defaultPath)
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, chosen, nil
}

// goTelemetry writes mode to the go command's telemetry mode file for
// the environment env (what `go telemetry <mode>` writes: go/telemetry/mode
// under $XDG_CONFIG_HOME, else $HOME/.config), unless one is there: a
// mode a command set stays. GOTELEMETRY in the environment sets nothing
// (the go command only reports the mode there).
func goTelemetry(env map[string]string, mode string) error {
	config := env["XDG_CONFIG_HOME"]
	if !filepath.IsAbs(config) {
		config = filepath.Join(env["HOME"], ".config")
	}
	dir := filepath.Join(config, "go", "telemetry")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "mode"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, werr := f.WriteString(mode)
	return errors.Join(werr, f.Close())
}

// maxCommandGOMAXPROCS bounds --command-gomaxprocs.
const maxCommandGOMAXPROCS = 1024

// withEnv is environ with k set to n, when n is positive (the last
// assignment of a name is the one a process sees, commandEnv's too).
func withEnv(environ []string, k string, n int64) []string {
	if n <= 0 {
		return environ
	}
	return append(slices.Clip(environ), k+"="+strconv.FormatInt(n, 10))
}

// writableDir creates dir if needed and checks that a file can be made in it.
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".sandbox-server-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
