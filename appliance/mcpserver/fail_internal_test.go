package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/appliance/web"
)

// Ensure that a tool of /mcp reads an error as the JSON API does: an error
// without a known code is a logged gateway_error that tells nothing of it,
// and a known code is passed on, unlogged.
func TestMCPServer_Fail_InternalErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   string
		logged bool
	}{
		{errors.New("decode receipts/7: hunter2"), holon.CodeGatewayError, true},
		{holon.Errorf("no_such_code", "hunter2"), holon.CodeGatewayError, true},
		{holon.Errorf(holon.CodeGatewayError, "derive sub-mandate"), holon.CodeGatewayError, true},
		{web.NotFound("no receipt r9"), holon.CodeNotFound, false},
	} {
		var logs bytes.Buffer
		m := &Server{log: slog.New(slog.NewJSONHandler(&logs, nil))}
		res := m.fail("get_receipt", tc.err)
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		var body mcpError
		if err := json.Unmarshal(b, &body); err != nil || body.Error == nil {
			t.Fatalf("%v: answered %s (%v)", tc.err, b, err)
		}
		if !res.IsError || body.Error.Code != tc.code || bytes.Contains(b, []byte("hunter2")) {
			t.Errorf("%v: answered %s, want a tool error %s telling nothing of it", tc.err, b, tc.code)
		}
		if n := strings.Count(logs.String(), "\n"); n != map[bool]int{true: 1, false: 0}[tc.logged] {
			t.Errorf("%v: logged %q", tc.err, logs.String())
		}
	}
}
