package mcpserver

import (
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	maxReadBytes   = 256 << 10 // read_file returns at most this much of a file
	maxListEntries = 1000      // list_files stops after this many entries
)

// readLimit says maxReadBytes in words, for read_file's schema and errors.
func readLimit() string { return fmt.Sprintf("%d (%d KiB)", maxReadBytes, maxReadBytes>>10) }

func (s *Server) addTools() {
	runOut, err := jsonschema.For[RunOutput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: output schema of run_go_code: %v", err)) // a programming error in RunOutput
	}
	runOut.Properties["outcome"].Enum = outcomes
	enumGoAware(runOut)
	runIn, err := jsonschema.For[RunInput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: input schema of run_go_code: %v", err))
	}
	runIn.Properties["timeout_seconds"].Description = fmt.Sprintf(
		"kill the command after this many seconds; default %s, at most %s",
		secs(s.cfg.DefaultTimeout), secs(s.cfg.MaxTimeout))

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:         "run_go_code",
		Title:        "Run Go code",
		Description:  fmt.Sprintf(runDescription, int(s.cfg.DefaultTimeout.Seconds()), int(s.cfg.MaxTimeout.Seconds())),
		InputSchema:  runIn,
		OutputSchema: runOut,
		Annotations: &mcp.ToolAnnotations{
			Title:           "Run Go code",
			DestructiveHint: ptr(true), // overwrites files under /app
			OpenWorldHint:   ptr(false),
		},
	}, s.runGoCode)

	readIn, err := jsonschema.For[ReadInput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: input schema of read_file: %v", err))
	}
	readIn.Properties["max_bytes"].Description = "bytes to return from offset; default and at most " + readLimit()
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "read_file",
		Title:       "Read a sandbox file",
		InputSchema: readIn,
		Description: fmt.Sprintf("Read a file from the sandbox's /app (files you wrote, program output redirected to a file, generated code). Returns at most %d KiB from offset (default 0) and the file's size; read a larger file in parts by passing offset (and max_bytes for smaller parts). A file holding NUL bytes or text that is not UTF-8 is reported as binary, not shown.", maxReadBytes>>10),
		Annotations: &mcp.ToolAnnotations{
			Title:          "Read a sandbox file",
			ReadOnlyHint:   true,
			IdempotentHint: true,
			OpenWorldHint:  ptr(false),
		},
	}, s.readFile)

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "list_files",
		Title:       "List sandbox files",
		Description: "List the files and directories under the sandbox's /app (or a subdirectory), with sizes; recursive lists the whole tree.",
		Annotations: &mcp.ToolAnnotations{
			Title:          "List sandbox files",
			ReadOnlyHint:   true,
			IdempotentHint: true,
			OpenWorldHint:  ptr(false),
		},
	}, s.listFiles)

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "reset_sandbox",
		Title:       "Reset the sandbox",
		Description: "Delete everything under /app to start over. The Go build and module caches stay, so the next build is still fast.",
		Annotations: &mcp.ToolAnnotations{
			Title:           "Reset the sandbox",
			DestructiveHint: ptr(true),
			IdempotentHint:  true,
			OpenWorldHint:   ptr(false),
		},
	}, s.resetSandbox)

	s.addGoAwareTools()
	s.addHandleTools()
	s.addSnapshotTools()
}

func secs(d time.Duration) string { return fmt.Sprintf("%gs", d.Seconds()) }
