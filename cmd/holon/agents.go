package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// agentsCommand is `holon agents serve` (the agent host) and `holon agents
// manifests` (the manifests another gateway lists them with).
type agentsCommand struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// ready, when set, receives the address the host listens on.
	ready func(addr string)
}

func (c *agentsCommand) Name() string { return "agents" }
func (c *agentsCommand) Synopsis() string {
	return "serve the shipped agents over MCP (serve), or write their mcp manifests (manifests)"
}

func (c *agentsCommand) usage() {
	fmt.Fprintln(c.stderr, `Usage: holon agents serve [--addr 127.0.0.1:8090] [--examples] [--gateway URL,...]
       holon agents manifests --endpoint URL [--examples] --out DIR

serve runs the agents compiled into this binary (the shipped ones, and the
demo ones with --examples) as one MCP server over Streamable HTTP at
/mcp, following the Holon MCP agent profile: each agent is a tool named
after it. Another gateway lists them as mcp agents with the manifests that
"manifests" writes (one JSON file per agent, runtime.endpoint = --endpoint).

HOLON_EXCLUDE (default "holon-labs/summarize,holon-labs/sec-company"; "none"
for no exclusion) leaves agents out. holon-labs/summarize needs
ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL, HOLON_SUMMARIZE_MODEL).`)
}

// flagUsage is the usage of one subcommand: the command's, then that
// subcommand's flags.
func (c *agentsCommand) flagUsage(fs *flag.FlagSet) func() {
	return func() {
		c.usage()
		fmt.Fprintf(c.stderr, "\nFlags of holon %s:\n", fs.Name())
		fs.PrintDefaults()
	}
}

func (c *agentsCommand) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		c.usage()
		return errUsage
	}
	switch args[0] {
	case "serve":
		return c.serve(ctx, args[1:])
	case "manifests":
		return c.manifests(args[1:])
	case "-h", "--help", "help":
		c.usage()
		return flag.ErrHelp
	}
	fmt.Fprintf(c.stderr, "holon agents: unknown subcommand %q\n\n", args[0])
	c.usage()
	return errUsage
}

// served loads the agents the host serves: the shipped ones, the demo ones
// when asked, less HOLON_EXCLUDE.
func (c *agentsCommand) served(examples bool) ([]*contract.Manifest, error) {
	exclude, err := agents.ParseExclude(c.getenv("HOLON_EXCLUDE"))
	if err != nil {
		return nil, err
	}
	sets := []string{agents.SetAgents}
	if examples {
		sets = append(sets, agents.SetExamples)
	}
	var ms []*contract.Manifest
	for _, set := range sets {
		s, err := agents.Load(set)
		if err != nil {
			return nil, err
		}
		ms = append(ms, agents.Without(s, exclude)...)
	}
	if len(ms) == 0 {
		return nil, errors.New("no agent to serve: HOLON_EXCLUDE leaves none")
	}
	return ms, nil
}

func (c *agentsCommand) serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("agents serve", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "address to listen on")
	examples := fs.Bool("examples", false, "serve the demo agents too")
	gateways := fs.String("gateway", "", "comma list of gateway origins the orchestrators may delegate to, and file links may point to (default: any)")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "how long running calls may take to finish on SIGTERM")
	fs.Usage = c.flagUsage(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		c.usage()
		return errUsage
	}
	ms, err := c.served(*examples)
	if err != nil {
		return err
	}
	opts := agents.OptionsFromEnv(c.getenv)
	if slices.ContainsFunc(ms, func(m *contract.Manifest) bool { return m.ID == "holon-labs/summarize" }) && opts.Summarize.APIKey == "" {
		return errors.New("holon-labs/summarize is served and ANTHROPIC_API_KEY is not set: set it, or leave summarize in HOLON_EXCLUDE")
	}
	rt := gateway.NewDevRuntime()
	agents.RegisterWith(rt, opts)
	log := slog.New(slog.NewTextHandler(c.stderr, nil))
	var origins []string
	for _, g := range strings.Split(*gateways, ",") {
		if g = strings.TrimSpace(g); g != "" {
			origins = append(origins, g)
		}
	}
	host, err := agents.NewHost(agents.HostConfig{Manifests: ms, Runtime: rt, Gateways: origins, Logger: log,
		Client: &http.Client{Timeout: 5 * time.Minute}})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", host)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`)
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("holon agents serving", "addr", ln.Addr().String(), "endpoint", "http://"+ln.Addr().String()+"/mcp", "tools", host.Tools())
	if c.ready != nil {
		c.ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

func (c *agentsCommand) manifests(args []string) error {
	fs := flag.NewFlagSet("agents manifests", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	endpoint := fs.String("endpoint", "", "the host's MCP endpoint, such as http://127.0.0.1:8090/mcp")
	examples := fs.Bool("examples", false, "the demo agents too")
	out := fs.String("out", "", "the directory to write the manifests to")
	fs.Usage = c.flagUsage(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *endpoint == "" || *out == "" || fs.NArg() > 0 {
		c.usage()
		return errUsage
	}
	ms, err := c.served(*examples)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, m := range ms {
		rm, err := agents.RemoteManifest(m, *endpoint)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Ref(), err)
		}
		b, err := json.MarshalIndent(rm, "", "  ")
		if err != nil {
			return err
		}
		path := filepath.Join(*out, m.Name()+".json")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, path)
	}
	return nil
}
