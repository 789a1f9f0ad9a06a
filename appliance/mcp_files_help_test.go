package appliance_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Ensure that an assistant connected to /mcp learns from the server's
// instructions and call_agent's description how to pass a file (upload
// with POST /v0/files and its agent key, then the holon://files/<id>
// handle in the input), and that doing exactly that works: the upload on
// the /mcp URL's origin with the session's key, its handle in call_agent.
func TestMCP_InstructionsSayHowToPassFiles(t *testing.T) {
	fa := newFilesApp(t)
	ann := fa.signup("ann")
	mcpURL := fa.srv.URL + "/mcp"
	s := connectMCP(t, mcpURL, ann.agentKey, nil)
	instructions := s.cs.InitializeResult().Instructions
	var callAgent string
	for _, tool := range s.tools {
		if tool.Name == "call_agent" {
			callAgent = tool.Description + " " + str(obj(obj(tool.InputSchema)["properties"])["input"])
		}
	}
	for what, text := range map[string]string{"the instructions": instructions, "call_agent": callAgent} {
		for _, want := range []string{"POST /v0/files", "agent key", "holon://files/<id>"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s do not say %q: %s", what, want, text)
			}
		}
	}
	if !strings.Contains(instructions, "Authorization: Bearer") || !strings.Contains(callAgent, "file_not_found") {
		t.Errorf("the instructions name no header, or call_agent no file_not_found")
	}

	// As written: the origin of the /mcp URL, the same key, the file as the body.
	req, err := http.NewRequest("POST", strings.TrimSuffix(mcpURL, "/mcp")+"/v0/files", bytes.NewReader([]byte("Parts\nBolts, 100, 4.00\n")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ann.agentKey)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var up struct{ File string }
	if err := json.NewDecoder(resp.Body).Decode(&up); err != nil || resp.StatusCode != http.StatusCreated || !strings.HasPrefix(up.File, "holon://files/") {
		t.Fatalf("upload as the instructions say: %d %v %+v", resp.StatusCode, err, up)
	}
	out := s.ok("call_agent", map[string]any{"agent": "holon-labs/text-tables", "input": map[string]any{"file": up.File}})
	if out["status"] != "succeeded" || !strings.Contains(str(out["output"]), "Bolts") {
		t.Errorf("call_agent with the handle: %v", out)
	}
}
