package appliance_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/ops"
)

// Ensure that the logger writes JSON lines in production and text
// otherwise, and that secrets and whole account keys never come out, in
// the message, in attributes (strings, errors, groups, WithAttrs), while
// a key's 14-character prefix does.
func TestNewLogger_RedactsSecretsAndKeys(t *testing.T) {
	const admin = "aDm1n-K3y-7hG5fD3sA1zX9cV7bN5mQ2wE"
	key := "hlk_a_" + strings.Repeat("abcd2345", 6) + "wxyz"
	prefix := key[:14]
	for _, env := range []string{appliance.EnvProduction, appliance.EnvDevelopment} {
		var buf bytes.Buffer
		log := ops.NewLogger(&buf, env == appliance.EnvProduction, admin, "", "short")
		log.Info("message with "+key, "key", prefix, "word", "short")
		log.Warn("attrs", "header", "Bearer "+admin, "err", fmt.Errorf("unknown key %s: %w", key, errors.New("x")),
			slog.Group("req", slog.String("auth", key)))
		log.With("token", admin).WithGroup("g").Error("with", "n", 3)
		out := buf.String()
		for _, secret := range []string{admin, key} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: a secret is in the logs:\n%s", env, out)
			}
		}
		if n := strings.Count(out, ops.Redacted); n < 5 {
			t.Errorf("%s: %d redactions, want 5:\n%s", env, n, out)
		}
		if !strings.Contains(out, prefix) {
			t.Errorf("%s: the key prefix %s was redacted too:\n%s", env, prefix, out)
		}
		if !strings.Contains(out, "short") {
			t.Errorf("%s: a value shorter than a secret was taken for one", env)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 {
			t.Fatalf("%s: %d lines, want 3:\n%s", env, len(lines), out)
		}
		for _, l := range lines {
			isJSON := json.Valid([]byte(l))
			if isJSON != (env == appliance.EnvProduction) {
				t.Errorf("%s: line is JSON %v: %s", env, isJSON, l)
			}
		}
	}
}
