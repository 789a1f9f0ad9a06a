package backup

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"holon.dev/holon/kv"
)

// The publishing records in PostgreSQL (kv/pg/migrations: credentials, signin).

var credentialColumns = []string{"agent", "doc"}

// convertCredential checks the sealed credential and loads its document as
// written; the table's columns are generated from it.
func convertCredential(r kv.Row) ([]any, error) {
	var c sealedCredential
	if err := decode(r.Value, &c); err != nil {
		return nil, err
	}
	return []any{string(r.Key), json.RawMessage(r.Value)}, nil
}

var signinColumns = []string{"key", "doc"}

// convertSignIn checks a sign-in record and loads its document as written.
func convertSignIn(r kv.Row) ([]any, error) {
	key := string(r.Key)
	kind, rest, _ := strings.Cut(key, "/")
	switch kind {
	case "github":
		if _, err := strconv.ParseInt(rest, 10, 64); err != nil {
			return nil, fmt.Errorf("sign-in link %s: not a GitHub id", key)
		}
		var handle string
		if err := json.Unmarshal(r.Value, &handle); err != nil {
			return nil, fmt.Errorf("sign-in link %s: %w", key, err)
		}
	case "state", "code":
		var s signinRecord
		if err := decode(r.Value, &s); err != nil {
			return nil, fmt.Errorf("sign-in %s: %w", key, err)
		}
	default:
		return nil, fmt.Errorf("sign-in record %q of no known kind", key)
	}
	return []any{key, json.RawMessage(r.Value)}, nil
}
