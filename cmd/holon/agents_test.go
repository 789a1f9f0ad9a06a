package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon/gateway"
)

// Ensure that holon agents serve --examples serves the shipped and demo
// agents, less HOLON_EXCLUDE's default (summarize), as MCP tools named after
// them that follow the profile, and stops on cancel.
func TestAgentsServe(t *testing.T) {
	var stderr bytes.Buffer
	ready := make(chan string, 1)
	c := &agentsCommand{stdout: &bytes.Buffer{}, stderr: &stderr, getenv: func(string) string { return "" },
		ready: func(addr string) { ready <- addr }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--examples"}) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("agents serve stopped: %v\n%s", err, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("agents serve did not start")
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"company-lookup", "csv-profile", "invoice-pipeline", "text-tables"}; !slices.Equal(names, want) {
		t.Errorf("tools %q, want %q (summarize excluded by default)", names, want)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "text-tables", Arguments: map[string]any{"text": "a, 1\nb, 2"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Meta["holon/units"] != float64(2) || res.StructuredContent == nil {
		t.Errorf("text-tables: isError %v, _meta %v, structured %v", res.IsError, res.Meta, res.StructuredContent)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "text-tables", Arguments: map[string]any{"text": "no table here"}})
	if err != nil {
		t.Fatal(err)
	}
	if code := res.StructuredContent.(map[string]any)["error"].(map[string]any)["code"]; !res.IsError || code != "no_table_found" {
		t.Errorf("no table: isError %v, code %v", res.IsError, code)
	}
	cs.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("agents serve: %v", err)
	}
}

// Ensure that holon agents serve refuses to start when it would serve
// summarize without an API key, and that a malformed HOLON_EXCLUDE is an
// error naming it.
func TestAgentsServe_Misconfigured(t *testing.T) {
	for env, want := range map[string]string{"none": "ANTHROPIC_API_KEY", "summarize": "HOLON_EXCLUDE"} {
		var stderr bytes.Buffer
		m := &Main{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(k string) string {
			if k == "HOLON_EXCLUDE" {
				return env
			}
			return ""
		}}
		if code := m.Run(context.Background(), []string{"agents", "serve", "--addr", "127.0.0.1:0"}); code != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("HOLON_EXCLUDE=%s: exit %d, stderr %q; want 1 naming %s", env, code, stderr.String(), want)
		}
	}
}

// Ensure that holon agents manifests writes, per served agent, a manifest
// of an mcp agent at the endpoint that a gateway's registry loads.
func TestAgentsManifests(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	if code := m.Run(context.Background(), []string{"agents", "manifests", "--endpoint", "http://127.0.0.1:8090/mcp", "--examples", "--out", dir}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	ms, err := gateway.LoadManifestDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 {
		t.Fatalf("%d manifests in %s, want 4", len(ms), dir)
	}
	for _, mf := range ms {
		if mf.Runtime.Kind != "mcp" || mf.Runtime.Endpoint != "http://127.0.0.1:8090/mcp" || mf.Runtime.Tool != mf.Name() {
			t.Errorf("%s: runtime %+v", mf.Ref(), mf.Runtime)
		}
		if _, err := os.Stat(filepath.Join(dir, mf.Name()+".json")); err != nil {
			t.Error(err)
		}
	}
}
