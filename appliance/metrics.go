package appliance

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"holon.dev/holon"
)

// MetricsPath is where the API serves the metrics: open on a dev gateway,
// behind the admin key on a hosted one.
const MetricsPath = "/metrics"

// metrics are the appliance's Prometheus metrics, in a registry of its own
// (no global state): calls by agent and status and their latency, the
// store's group-commit batch sizes, the holds open, the store's size and
// write counters, the HTTP requests, and the Go runtime's and process's
// usual families. Labels only ever hold bounded values: agent versions the
// registry resolved, statuses, error codes, methods and status codes.
type metrics struct {
	reg          *prometheus.Registry
	calls        *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	batches      prometheus.Histogram
	requests     *prometheus.CounterVec
	inFlight     prometheus.Gauge
	closedAtOpen prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holon_calls_total",
			Help: "Calls answered, by agent (ns/name@version, \"none\" when no agent resolved), status and error code.",
		}, []string{"agent", "status", "error"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "holon_call_duration_seconds",
			Help:    "Time from a call's arrival to its answer (admission, reservation, run, settlement), by agent and status.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"agent", "status"}),
		batches: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "holon_store_commit_batch_size",
			Help:    "Updates (settlements, reservations, receipts) grouped into each committed write transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holon_http_requests_total",
			Help: "HTTP requests answered by the API, by method and status code.",
		}, []string{"method", "code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "holon_http_requests_in_flight",
			Help: "HTTP requests being served by the API.",
		}),
		closedAtOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "holon_calls_closed_at_start",
			Help: "Calls the previous run left in flight, closed as gateway_restarted (never billed) when this one started.",
		}),
	}
	m.reg.MustRegister(m.calls, m.latency, m.batches, m.requests, m.inFlight, m.closedAtOpen,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// watchStore adds the families read from the store at each scrape;
// inMemory counts the calls whose hold the engine keeps in memory.
func (m *metrics) watchStore(s holon.Store, inMemory func() int) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "holon_holds_open",
			Help: "Holds open: calls reserved and not settled yet (in the store or in memory).",
		}, func() float64 {
			var n int
			err := s.View(func(tx holon.Tx) error {
				hs, err := tx.Holds()
				n = len(hs)
				return err
			})
			if err != nil {
				return math.NaN()
			}
			return float64(n + inMemory())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "holon_store_size_bytes",
			Help: "Size of the database file.",
		}, func() float64 { return float64(s.Stats().SizeBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "holon_store_commits_total",
			Help: "Write transactions committed.",
		}, func() float64 { return float64(s.Stats().Commits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "holon_store_updates_total",
			Help: "Updates committed (holon_store_updates_total / holon_store_commits_total is the mean batch).",
		}, func() float64 { return float64(s.Stats().Updates) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "holon_store_batch_replays_total",
			Help: "Write transactions rolled back and replayed without an update that panicked (a failing update is undone alone, without a replay).",
		}, func() float64 { return float64(s.Stats().Replays) }),
	)
}

// observeCall counts a call the engine answered.
func (m *metrics) observeCall(r *holon.Receipt, d time.Duration) {
	agent := "none"
	if r.Agent != nil {
		agent = *r.Agent
	}
	code := ""
	if r.Error != nil {
		code = *r.Error
	}
	m.calls.WithLabelValues(agent, r.Status, code).Inc()
	m.latency.WithLabelValues(agent, r.Status).Observe(d.Seconds())
}

// observeBatch records the size of a committed write transaction.
func (m *metrics) observeBatch(n int) { m.batches.Observe(float64(n)) }

// handler serves the registry in the Prometheus text format. A collector
// that fails (a /proc file a sandbox hides, say) is logged and left out;
// the other families are still served.
func (m *metrics) handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      promLogger{log},
	})
}

// promLogger hands promhttp's errors to the gateway's logger.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Warn("metrics: " + strings.TrimSpace(fmt.Sprintln(v...)))
}

// instrument serves MetricsPath in front of the API, and counts the API's
// requests. On a hosted gateway the metrics need the admin key: they name
// agents and show traffic.
func (m *metrics) instrument(api http.Handler, cfg Config) http.Handler {
	scrape := m.handler(cfg.Logger)
	var adminKey []byte
	if cfg.AdminKey != "" {
		sum := sha256.Sum256([]byte(cfg.AdminKey))
		adminKey = sum[:]
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == MetricsPath {
			if !cfg.Hosted {
				if err := checkHost(r, cfg.PublicURL); err != nil {
					writeError(w, http.StatusMisdirectedRequest, err)
					return
				}
			}
			if cfg.Hosted && !bearerMatches(r, adminKey) {
				writeError(w, http.StatusUnauthorized, holon.Errorf(CodeUnauthenticated,
					"GET %s needs the admin key: send it as Authorization: Bearer <key>, or scrape the --metrics-addr listener", MetricsPath))
				return
			}
			scrape.ServeHTTP(w, r)
			return
		}
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		cw := &codeWriter{ResponseWriter: w}
		defer func() {
			code := cw.code
			if code == 0 {
				code = http.StatusOK
			}
			m.requests.WithLabelValues(methodLabel(r.Method), strconv.Itoa(code)).Inc()
		}()
		api.ServeHTTP(cw, r)
	})
}

// bearerMatches compares the request's bearer token with a SHA-256 in
// constant time; a nil want matches nothing.
func bearerMatches(r *http.Request, want []byte) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if want == nil || !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(sum[:], want) == 1
}

// methodLabel keeps the method label bounded: a client can send any word.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// codeWriter remembers the status code of a response.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *codeWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers (the MCP server) flush through the wrapper.
func (w *codeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *codeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// MetricsHandler serves the appliance's metrics with no authentication,
// for a listener of their own (holon serve --metrics-addr, loopback by
// default).
func (a *App) MetricsHandler() http.Handler { return a.metrics.handler(a.log) }
