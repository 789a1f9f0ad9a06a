package appliance_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Ensure that the Go SDK's OAuth client (auth.AuthorizationCodeHandler,
// which checks the metadata, the state and the RFC 9207 issuer) connects
// too: a second conforming client besides the TypeScript one. Its browser
// is an HTTP client with the human's console session.
func TestOAuth_GoSDKClient(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	b := signIn(t, ta, ann.humanKey)
	consented := 0
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{"http://127.0.0.1:7777/callback"}, ClientName: "Go Client",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
			TokenEndpointAuthMethod: "none",
		}},
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			u, err := url.Parse(args.URL)
			if err != nil {
				return nil, err
			}
			resp, _ := b.get(u.RequestURI())
			resp, page := b.get(resp.Header.Get("Location"))
			if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Go Client") {
				return nil, fmt.Errorf("consent page: %d", resp.StatusCode)
			}
			form := u.Query()
			form.Set("decision", "allow")
			form.Set("mandate", "ann/sandbox")
			resp, _ = b.post("/console/connect", form)
			back, err := url.Parse(resp.Header.Get("Location"))
			if err != nil || resp.StatusCode != http.StatusSeeOther {
				return nil, fmt.Errorf("consent: %d %v", resp.StatusCode, err)
			}
			consented++
			q := back.Query()
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "go-oauth-test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ta.srv.URL + "/mcp", OAuthHandler: h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_budget", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := res.StructuredContent.(map[string]any); res.IsError || m["mandate"] != "ann/sandbox" || consented != 1 {
		t.Errorf("get_budget over OAuth: %v (consented %d times)", res.StructuredContent, consented)
	}
}
