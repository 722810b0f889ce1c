package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// capabilities is what the server declares in initialize and
// server/discover besides tools, which the go-sdk declares itself once a
// tool is added: nothing. The go-sdk answers prompts/list and
// resources/list with an empty list all the same; undeclared answers
// them, as MCP clients and the conformance suite expect, with -32601.
// Declaring prompts or resources here lets their methods through.
func capabilities() *mcp.ServerCapabilities { return &mcp.ServerCapabilities{} }

// undeclared returns a receiving middleware that answers the methods of
// a capability caps does not declare (prompts/*, resources/*) with a
// JSON-RPC error -32601 Method not found, over every transport; the go-sdk
// turns it into HTTP 404 for MCP 2026-07-28 requests. completion/complete
// needs nothing: the go-sdk refuses it without a completion handler.
// logging/setLevel stays: the go-sdk accepts it, and clients set a level
// whether or not logging is declared.
func undeclared(caps *mcp.ServerCapabilities) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			family, _, _ := strings.Cut(method, "/")
			if (family == "prompts" && caps.Prompts == nil) || (family == "resources" && caps.Resources == nil) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
					Message: fmt.Sprintf("method %q not found: this server declares no %s capability (it offers tools only)", method, family)}
			}
			return next(ctx, method, req)
		}
	}
}
