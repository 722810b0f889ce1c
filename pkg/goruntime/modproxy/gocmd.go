package modproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procgroup"
)

// GoCommand is the Source that runs the host's go command: `go mod
// download -json` for a version, `go list -m -json -versions -retracted`
// for a list, `go list -m -json mod@query` for a query. The go command
// uses Env (its GOPROXY, GOSUMDB and network: the host's) and writes into
// the GOMODCACHE Env names, which must be the Proxy's ModCache.
type GoCommand struct {
	// Go is the go command's path.
	Go string
	// Env is the go command's whole environment. It should set
	// GOMODCACHE, GOPROXY, GOSUMDB, GOFLAGS= and GOTOOLCHAIN=local.
	Env []string
	// Dir is the working directory: one without a go.mod above it, so
	// the commands run outside any module.
	Dir string
}

// maxGoOutput bounds what is kept of one go command's stdout and stderr.
const maxGoOutput = 1 << 20

// Download runs `go mod download -json mod@version`.
func (g GoCommand) Download(ctx context.Context, mod, version string) error {
	var out struct{ Error string }
	err := g.run(ctx, &out, "mod", "download", "-json", mod+"@"+version)
	if out.Error != "" { // it reports a module's failure here, not on stderr
		return errors.New("host go mod download: " + out.Error)
	}
	return err
}

// Versions runs `go list -m -json -versions -retracted mod`.
func (g GoCommand) Versions(ctx context.Context, mod string) ([]string, error) {
	var out struct{ Versions []string }
	if err := g.run(ctx, &out, "list", "-m", "-json", "-versions", "-retracted", mod); err != nil {
		return nil, err
	}
	return out.Versions, nil
}

// Query runs `go list -m -json mod@query`.
func (g GoCommand) Query(ctx context.Context, mod, query string) (Info, error) {
	var out struct {
		Version string
		Time    *time.Time
	}
	if err := g.run(ctx, &out, "list", "-m", "-json", mod+"@"+query); err != nil {
		return Info{}, err
	}
	info := Info{Version: out.Version}
	if out.Time != nil {
		info.Time = *out.Time
	}
	return info, nil
}

// run runs the go command with args in its own process group (killed
// whole when ctx ends or this process does: procgroup.Run) and decodes its JSON stdout into v. A failure's
// error is the go command's stderr.
func (g GoCommand) run(ctx context.Context, v any, args ...string) error {
	cmd := exec.CommandContext(ctx, g.Go, args...)
	cmd.Env, cmd.Dir = g.Env, g.Dir
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := procgroup.Run(cmd)
	if jerr := json.Unmarshal(stdout.Bytes(), v); err == nil && jerr != nil {
		err = fmt.Errorf("decode its output: %w", jerr)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		if ctx.Err() != nil {
			msg += " (" + ctx.Err().Error() + ")"
		}
		return fmt.Errorf("host go %s: %s", strings.Join(args[:2], " "), msg)
	}
	return nil
}

// capped is a buffer keeping the first maxGoOutput bytes written.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxGoOutput - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
