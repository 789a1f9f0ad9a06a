package appliance_test

import (
	"strings"
	"testing"

	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// Ensure that a development gateway may be reached over http (holon serve
// defaults HOLON_PUBLIC_URL to its listening address), while production
// wants https, and a malformed origin is refused everywhere.
func TestConfig_PublicURLScheme(t *testing.T) {
	for _, tc := range []struct {
		env, url string
		ok       bool
	}{
		{appliance.EnvDevelopment, "http://127.0.0.1:8080", true},
		{appliance.EnvDevelopment, "https://gw.example.com", true},
		{appliance.EnvDevelopment, "http://127.0.0.1:8080/x?y=1", false},
		{appliance.EnvDevelopment, "ftp://gw.example.com", false},
		{appliance.EnvProduction, "http://gw.example.com", false},
	} {
		cfg := appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler, Env: tc.env, PublicURL: tc.url}
		err := cfg.Check()
		if got := err == nil || !strings.Contains(err.Error(), "HOLON_PUBLIC_URL"); got != tc.ok {
			t.Errorf("%s %s: %v, want ok %v", tc.env, tc.url, err, tc.ok)
		}
	}
}
