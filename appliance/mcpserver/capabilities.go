package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// undeclared are the method families of the capabilities /mcp does not
// declare: it offers tools (and logging), no prompts and no resources.
var undeclared = []string{"prompts/", "resources/"}

// onlyDeclared answers the methods of a capability /mcp does not declare
// with method not found, as a server without the capability has no such
// method. The SDK answers prompts/list and resources/list with empty
// lists whatever the server declares; at 2026-07-28 a client that sees
// such an answer may take it for prompts the server offers without
// declaring them, which the revision forbids (a server that supports
// prompts MUST declare the capability in server/discover).
func onlyDeclared(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		for _, family := range undeclared {
			if strings.HasPrefix(method, family) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
					Message: fmt.Sprintf("%s: this server offers no %s, only tools (its capabilities say so)", method, strings.TrimSuffix(family, "/"))}
			}
		}
		return next(ctx, method, req)
	}
}
