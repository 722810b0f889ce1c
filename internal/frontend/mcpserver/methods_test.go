package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The methods of prompts and resources, which the server does not
// declare, answer -32601 Method not found over stdio, stateful and
// stateless HTTP (2026-07-28 there, also HTTP 404); tools work.
func TestUndeclaredMethodsNotFound(t *testing.T) {
	for _, mode := range []string{"stdio", "http", "stateless"} {
		t.Run(mode, func(t *testing.T) {
			s, _ := newTestServer(t, Config{Stateless: mode == "stateless"})
			var cs *mcp.ClientSession
			if mode == "stdio" {
				cs = connectMemory(t, s, nil)
			} else {
				cs = connectHTTP(t, httpServer(t, s))
			}
			if caps := cs.InitializeResult().Capabilities; caps.Prompts != nil || caps.Resources != nil || caps.Tools == nil {
				t.Fatalf("declared capabilities: %+v", caps)
			}
			ctx := context.Background()
			for method, call := range map[string]func() error{
				"prompts/list":             func() error { _, err := cs.ListPrompts(ctx, nil); return err },
				"prompts/get":              func() error { _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "x"}); return err },
				"resources/list":           func() error { _, err := cs.ListResources(ctx, nil); return err },
				"resources/templates/list": func() error { _, err := cs.ListResourceTemplates(ctx, nil); return err },
				"resources/read":           func() error { _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///x"}); return err },
			} {
				var jerr *jsonrpc.Error
				if err := call(); !errors.As(err, &jerr) || jerr.Code != jsonrpc.CodeMethodNotFound {
					t.Errorf("%s: %v, want JSON-RPC error %d", method, err, jsonrpc.CodeMethodNotFound)
				}
			}
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Errorf("tools/list: %v", err)
			}
		})
	}
}

// A stateless 2026-07-28 POST of an undeclared method gets HTTP 404 with
// the JSON-RPC error, as SEP-2575 asks.
func TestUndeclaredMethodStatelessStatus(t *testing.T) {
	s, _ := newTestServer(t, Config{Stateless: true})
	url := httpServer(t, s)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"prompts/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "prompts/list")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := <-readStream(resp)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "-32601") {
		t.Fatalf("prompts/list: %s %s", resp.Status, body)
	}
}
