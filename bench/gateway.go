package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
	"holon.dev/holon/kv/pg"
)

// The bench's agents and mandates. Every payer has its own mandate, so
// clients spread over 64 payers while the platform, the author's account,
// the agent's record and the counters are shared by every settlement, as
// on a real gateway.
const (
	agentEcho    = "bench/echo"     // dev, in-process: returns its input
	agentMCPEcho = "bench/mcp-echo" // mcp, on loopback: returns its input
	agentSlow    = "bench/slow"     // dev: waits until released
	benchPayers  = 64
	callPrice    = "0.01"
)

func mandateID(i int) string { return fmt.Sprintf("p%02d/bench", i%benchPayers) }

// gatewayConfig says what a bench gateway serves.
type gatewayConfig struct {
	dir string
	// mcpEndpoint, when set, lists bench/mcp-echo at it.
	mcpEndpoint string
	// slow, when set, runs bench/slow.
	slow *slowAgent
	// control, when set, serves /bench/ beside the API.
	control http.Handler
	// hosted runs the gateway hosted (accounts, keys, scoping), with the
	// admin key adminKey and no rate limit; its payers sign up through the
	// API (see hosted.go), so no mandate files are written.
	hosted bool
	// db, when set, is the store to open instead of a new one in dir.
	db string
	// store, when set, is a PostgreSQL store's URL to serve from instead.
	store string
}

// adminKey is the hosted bench gateway's operator key.
const adminKey = "bench-admin-key-0123456789abcdefghijklmnopqrstuvwxyz"

// benchGateway is an appliance (dev mode, fsync on) served over loopback HTTP.
type benchGateway struct {
	app *appliance.App
	// store is the bbolt store under the gateway, for its writer's
	// statistics and the journal check.
	store *kv.Store
	srv   *http.Server
	url   string
}

// openGateway writes the bench's manifests and mandates under cfg.dir,
// opens an appliance on a new store there and serves it on a free port.
func openGateway(ctx context.Context, cfg gatewayConfig) (*benchGateway, error) {
	reg, mand := filepath.Join(cfg.dir, "registry"), filepath.Join(cfg.dir, "mandates")
	for _, d := range []string{reg, mand} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	files := map[string]string{
		filepath.Join(reg, "echo.yaml"): manifest(agentEcho, "{kind: dev, tool: bench-echo}"),
		filepath.Join(reg, "slow.yaml"): manifest(agentSlow, "{kind: dev, tool: bench-slow, limits: {timeout_s: 300}}"),
	}
	if cfg.mcpEndpoint != "" {
		files[filepath.Join(reg, "mcp-echo.yaml")] = manifest(agentMCPEcho, fmt.Sprintf("{kind: mcp, endpoint: %q, tool: echo}", cfg.mcpEndpoint))
	}
	for i := range benchPayers {
		files[filepath.Join(mand, fmt.Sprintf("p%02d.yaml", i))] = fmt.Sprintf(`id: %s
issuer: p%02d
grantee: p%02d/client
currency: EUR
budget: {total: "1000000.00", per_call: "1.00"}
allow: {agents: ["bench/*"]}
`, mandateID(i), i, i)
	}
	for name, body := range files {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			return nil, err
		}
	}
	slow := cfg.slow
	if slow == nil {
		slow = newSlowAgent()
	}
	var store *kv.Store
	acfg := appliance.Config{
		DB: filepath.Join(cfg.dir, "holon.db"),
		OpenStore: func(path string, o holon.StoreOptions) (holon.Store, error) {
			s, err := kv.Open(path, kv.OptionsOf(o))
			store = s
			if err != nil {
				return nil, err
			}
			return s.Holon(), nil
		},
		Backup:                backup.StoreHandler,
		Registry:              []string{reg},
		MandatesDir:           mand,
		SignupCredit:          journal.MustParseAmount("1000000.00"),
		Logger:                slog.New(slog.DiscardHandler),
		AllowPrivateEndpoints: true,
		DevHandlers: map[string]gateway.DevHandler{
			"bench-echo": func(_ context.Context, in json.RawMessage, _ *gateway.Ctx) (any, error) { return in, nil },
			"bench-slow": slow.run,
		},
	}
	if cfg.db != "" {
		acfg.DB = cfg.db
	}
	if cfg.store != "" {
		acfg.OpenStore = func(_ string, o holon.StoreOptions) (holon.Store, error) { return pg.OpenStore(cfg.store, o) }
	}
	if cfg.hosted {
		acfg.Hosted, acfg.AdminKey, acfg.MandatesDir = true, adminKey, ""
		acfg.Limits = appliance.Limits{
			Account: appliance.Limit{Rate: rate.Inf}, Address: appliance.Limit{Rate: rate.Inf},
			Signup: appliance.Limit{Rate: rate.Inf}, MaxTracked: 1000,
		}
	}
	app, err := appliance.Open(ctx, acfg)
	if err != nil {
		return nil, fmt.Errorf("open the bench gateway: %w", err)
	}
	ln, url, err := listen()
	if err != nil {
		app.Close()
		return nil, err
	}
	h := app.Handler()
	if cfg.control != nil {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.Handle("/bench/", cfg.control)
		h = mux
	}
	g := &benchGateway{app: app, store: store, url: url, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

func manifest(id, runtime string) string {
	return fmt.Sprintf(`id: %s
version: 1.0.0
summary: An agent of holon bench.
license: proprietary
interface: {input: {type: object}, output: {type: object}}
pricing: {model: per_run, amount: %q, currency: EUR}
runtime: %s
`, id, callPrice, runtime)
}

// Close stops serving and closes the store.
func (g *benchGateway) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := g.srv.Shutdown(ctx)
	return errors.Join(err, g.app.Close())
}

// Store is the gateway's store.
func (g *benchGateway) Store() *kv.Store { return g.store }

// moneyState is what the money check compares before and after a load.
type moneyState struct {
	entries uint64
	holds   int
}

func (g *benchGateway) money() (moneyState, error) {
	var st moneyState
	err := g.app.Engine().Store().View(func(tx holon.Tx) error {
		st.entries = tx.Counter("journal_entries")
		hs, err := tx.Holds()
		st.holds = len(hs)
		return err
	})
	return st, err
}

// checkMoney checks the whole journal (every entry sums to zero, balances
// are the sums of their lines, the hash chain holds), that no call left a
// hold, and that the settlements journaled since before are settled.
func (g *benchGateway) checkMoney(before moneyState, settled int) (string, error) {
	after, err := g.money()
	if err != nil {
		return "", err
	}
	if after.holds != 0 {
		return "", fmt.Errorf("%d holds left after every call returned", after.holds)
	}
	if got := int(after.entries - before.entries); got != settled {
		return "", fmt.Errorf("%d calls answered 200 (settled, billed) but %d settlement entries were journaled", settled, got)
	}
	err = g.app.Engine().Store().View(func(tx holon.Tx) error {
		return tx.(interface{ VerifyJournal() error }).VerifyJournal() // kv's and pg's: the chain's head too
	})
	if err != nil {
		return "", fmt.Errorf("journal: %w", err)
	}
	verified := ""
	if g.store != nil {
		// Every check holon verify makes, on the store as the load left it.
		rep, err := backup.Verify(g.store)
		if err != nil {
			return "", err
		}
		if !rep.OK() {
			var b strings.Builder
			rep.WriteTo(&b)
			return "", fmt.Errorf("holon verify on the row's store:\n%s", b.String())
		}
		verified = fmt.Sprintf("; holon verify's %d checks passed on the store", len(rep.Checks))
	}
	return fmt.Sprintf("money checked: %s settlements journaled for %s calls answered 200, journal sums to zero with its hash chain intact, balances match, no hold left%s",
		thousands(int64(after.entries-before.entries)), thousands(int64(settled)), verified), nil
}

// slowAgent is bench/slow: each run waits until release (or its timeout),
// counting the runs waiting.
type slowAgent struct {
	mu      sync.Mutex
	waiting int
	gate    chan struct{}
}

func newSlowAgent() *slowAgent { return &slowAgent{gate: make(chan struct{})} }

func (s *slowAgent) run(ctx context.Context, in json.RawMessage, _ *gateway.Ctx) (any, error) {
	s.mu.Lock()
	s.waiting++
	gate := s.gate
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
	}()
	select {
	case <-gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return in, nil
}

// Waiting is how many runs are waiting.
func (s *slowAgent) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// Release lets every waiting run finish; later runs wait again.
func (s *slowAgent) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gate)
	s.gate = make(chan struct{})
}

// freePort is a loopback address nobody listens on (for a child process).
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
