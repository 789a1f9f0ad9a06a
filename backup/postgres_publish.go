package backup

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"holon.dev/holon/kv"
)

// The publishing records in PostgreSQL (schema.sql: credentials, signin).

var credentialColumns = []string{"agent", "version", "nonce", "sealed", "set_at"}

func convertCredential(r kv.Row) ([]any, error) {
	var c sealedCredential
	if err := decode(r.Value, &c); err != nil {
		return nil, err
	}
	return []any{string(r.Key), c.V, c.Nonce, c.Sealed, c.Set}, nil
}

var signinColumns = []string{"key", "kind", "github_id", "hash", "handle", "new_account", "expires"}

func convertSignIn(r kv.Row) ([]any, error) {
	key := string(r.Key)
	kind, rest, _ := strings.Cut(key, "/")
	switch kind {
	case "github":
		id, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("sign-in link %s: not a GitHub id", key)
		}
		var handle string
		if err := json.Unmarshal(r.Value, &handle); err != nil {
			return nil, fmt.Errorf("sign-in link %s: %w", key, err)
		}
		return []any{key, kind, id, nil, handle, false, nil}, nil
	case "state", "code":
		var s signinRecord
		if err := decode(r.Value, &s); err != nil {
			return nil, fmt.Errorf("sign-in %s: %w", key, err)
		}
		return []any{key, kind, nil, rest, optText(s.Handle), s.New, s.Expires}, nil
	}
	return nil, fmt.Errorf("sign-in record %q of no known kind", key)
}
