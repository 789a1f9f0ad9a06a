package appliance_test

import (
	"strings"
	"testing"

	"holon.dev/holon/appliance"
)

// Ensure that GitHub's web and API origins are settings (a GitHub
// Enterprise Server works) and that a malformed one refuses to start.
func TestConfig_GitHubURLs(t *testing.T) {
	env := map[string]string{"HOLON_GITHUB_URL": "https://ghe.example.com", "HOLON_GITHUB_API_URL": "https://ghe.example.com/api/v3"}
	var cfg appliance.Config
	if err := appliance.ConfigFromEnv(func(k string) string { return env[k] }, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.GitHubURL != env["HOLON_GITHUB_URL"] || cfg.GitHubAPIURL != env["HOLON_GITHUB_API_URL"] {
		t.Errorf("config %q %q", cfg.GitHubURL, cfg.GitHubAPIURL)
	}
	if err := cfg.Check(); err != nil {
		t.Errorf("check: %v", err)
	}
	cfg.GitHubAPIURL = "ghe.example.com/api"
	if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), "HOLON_GITHUB_API_URL") {
		t.Errorf("a malformed API origin: %v", err)
	}
}
