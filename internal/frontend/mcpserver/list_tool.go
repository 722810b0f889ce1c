package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

func (s *Server) listFiles(ctx context.Context, req *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListOutput, error) {
	root, err := cleanPath(in.Path, true)
	if err != nil {
		return nil, ListOutput{}, err
	}
	out := ListOutput{Path: root, Entries: []ListEntry{}}
	u, err := s.call(ctx, req, in.SandboxID, needSandbox, nil, func(sess *goruntime.Session, _ time.Duration) error {
		queue := []string{root}
		for len(queue) > 0 && !out.Truncated {
			dir := queue[0]
			queue = queue[1:]
			infos, err := sess.List(ctx, dir)
			if err != nil {
				if dir != root && errors.Is(err, goruntime.ErrNotExist) {
					continue // removed while we walked
				}
				return err
			}
			slices.SortFunc(infos, func(a, b goruntime.FileInfo) int { return strings.Compare(a.Name, b.Name) })
			for _, fi := range infos {
				if len(out.Entries) == maxListEntries {
					out.Truncated = true
					break
				}
				p := fi.Name
				if dir != "." {
					p = dir + "/" + fi.Name
				}
				out.Entries = append(out.Entries, ListEntry{Path: p, IsDir: fi.IsDir, Size: fi.Size})
				if fi.IsDir && in.Recursive {
					queue = append(queue, p)
				}
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, goruntime.ErrNotExist):
		return nil, ListOutput{}, fmt.Errorf("list %s: no such directory under /app", root)
	case err != nil:
		return nil, ListOutput{}, sessions.Describe(err) // the library names the operation and the path
	}
	out.SandboxID = u.ID
	if in.Recursive {
		slices.SortFunc(out.Entries, func(a, b ListEntry) int { return strings.Compare(a.Path, b.Path) })
	}
	var b strings.Builder
	if len(out.Entries) == 0 {
		fmt.Fprintf(&b, "/app/%s is empty", strings.TrimPrefix(root, "."))
	}
	for _, e := range out.Entries {
		if e.IsDir {
			fmt.Fprintf(&b, "%s/\n", e.Path)
		} else {
			fmt.Fprintf(&b, "%s  %d bytes\n", e.Path, e.Size)
		}
	}
	if out.Truncated {
		fmt.Fprintf(&b, "[... stopped after %d entries ...]", maxListEntries)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimRight(b.String(), "\n")}}}, out, nil
}
