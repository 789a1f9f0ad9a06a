package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
)

// gatewayClient calls a running hosted gateway with a human key, from
// HOLON_URL and HOLON_KEY (or --url and --key).
type gatewayClient struct {
	url, key string
	http     *http.Client
}

func newGatewayClient(getenv func(string) string, url, key string) (*gatewayClient, error) {
	if url == "" {
		url = getenv("HOLON_URL")
	}
	if key == "" {
		key = getenv("HOLON_KEY")
	}
	switch {
	case url == "":
		return nil, errors.New("no gateway: set HOLON_URL (such as https://holon.example.com) or pass --url")
	case key == "":
		return nil, errors.New("no key: set HOLON_KEY to your human key (hlk_h_…, from signing in with GitHub) or pass --key")
	}
	return &gatewayClient{url: strings.TrimRight(url, "/"), key: key, http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// gatewayFlags are --url and --key, which default to HOLON_URL and HOLON_KEY.
func gatewayFlags(fs *flag.FlagSet) (url, key *string) {
	return fs.String("url", "", "the gateway's base URL (default: $HOLON_URL)"),
		fs.String("key", "", "your human key (default: $HOLON_KEY)")
}

// apiError is a gateway's error answer, printed with its fields.
type apiError struct {
	status int
	err    holon.Error
}

func (e *apiError) Error() string {
	if e.err.Code == "" {
		return fmt.Sprintf("the gateway answered %d %s", e.status, http.StatusText(e.status))
	}
	return e.err.Error()
}

// do sends body as JSON and decodes a 2xx answer into out.
func (c *gatewayClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("reach the gateway: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("read the gateway's answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Error holon.Error `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return &apiError{status: resp.StatusCode, err: e.Error}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// publishCommand publishes a version: holon publish holon.yaml.
type publishCommand struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func (c *publishCommand) Name() string { return "publish" }
func (c *publishCommand) Synopsis() string {
	return "publish a version of your agent (holon.yaml) to a hosted gateway"
}

func (c *publishCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	url, key := gatewayFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(c.stderr, `Usage: holon publish [--url URL] [--key KEY] holon.yaml

Checks the manifest here, then publishes it (POST /v0/agents) to the
gateway at HOLON_URL with the human key in HOLON_KEY. The version is
listed at once when every rule holds: its id is in your namespace, your
account is linked to GitHub (an open-source agent's source.repository is
a public repository of yours or of an organisation that lists you as a
public member), the runtime is mcp or webhook on a public https endpoint,
and the version was never published before. Set the endpoint's token
first with holon credential set, so that the evaluation gets through.

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	b, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	m, err := contract.ParseManifest(b)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	gc, err := newGatewayClient(c.getenv, *url, *key)
	if err != nil {
		return err
	}
	var ans struct {
		Agent         string `json:"agent"`
		License       string `json:"license"`
		Proprietary   bool   `json:"proprietary"`
		Repository    string `json:"repository"`
		CredentialSet bool   `json:"credential_set"`
	}
	if err := gc.do(ctx, http.MethodPost, "/v0/agents", m, &ans); err != nil {
		return err
	}
	what := ans.License + ", source " + ans.Repository
	if ans.Proprietary {
		what = "proprietary: listed with that label"
	}
	cred := "no endpoint credential set"
	if ans.CredentialSet {
		cred = "its endpoint credential is sent on every call"
	}
	fmt.Fprintf(c.stdout, "published %s (%s; %s)\n", ans.Agent, what, cred)
	return nil
}

// credentialCommand sets or deletes an agent's endpoint credential.
type credentialCommand struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

func (c *credentialCommand) Name() string { return "credential" }
func (c *credentialCommand) Synopsis() string {
	return "set or delete the token the gateway sends to your agent's endpoint"
}

func (c *credentialCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("credential", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	url, key := gatewayFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(c.stderr, `Usage: holon credential [--url URL] [--key KEY] set <ns/name> < token
       holon credential [--url URL] [--key KEY] delete <ns/name>

set reads the token from standard input (one line; never an argument, so
it stays out of the shell's history and the process list) and stores it
for every version of the agent (PUT /v0/agents/{ns}/{name}/credential):
the gateway then sends Authorization: Bearer <token> on every call and
evaluation. It can be set before the first version is published. The
token is write-only: nothing shows it again. delete removes it.

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 || (fs.Arg(0) != "set" && fs.Arg(0) != "delete") || strings.Count(fs.Arg(1), "/") != 1 || strings.Contains(fs.Arg(1), "@") {
		fs.Usage()
		return errUsage
	}
	gc, err := newGatewayClient(c.getenv, *url, *key)
	if err != nil {
		return err
	}
	path := "/v0/agents/" + fs.Arg(1) + "/credential"
	if fs.Arg(0) == "delete" {
		if err := gc.do(ctx, http.MethodDelete, path, nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "deleted the endpoint credential of %s: calls go without one\n", fs.Arg(1))
		return nil
	}
	line, err := bufio.NewReader(io.LimitReader(c.stdin, 8192)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the token from standard input: %w", err)
	}
	token := strings.TrimRight(line, "\r\n")
	if token == "" {
		return errors.New("no token on standard input: pipe it in, such as holon credential set ns/name < token.txt")
	}
	if err := gc.do(ctx, http.MethodPut, path, map[string]string{"token": token}, nil); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "set the endpoint credential of %s: every call and evaluation of every version carries it\n", fs.Arg(1))
	return nil
}
