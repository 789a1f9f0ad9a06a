// Package ops is what the operator runs the gateway with: the Prometheus
// metrics (in a registry of their own), the logger that scrubs secrets
// out of every line, and systemd's notification socket and watchdog.
//
// It may import the domain (holon), token and web; no other room.
package ops

import (
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
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
)

// MetricsPath is where the API serves the metrics: open on a dev gateway,
// behind the admin key on a hosted one.
const MetricsPath = "/metrics"

// Metrics are the appliance's Prometheus metrics, in a registry of its own
// (no global state): calls by agent and status and their latency, the
// store's group-commit batch sizes, the holds open, the store's size and
// write counters, the HTTP requests, and the Go runtime's and process's
// usual families. Labels only ever hold bounded values: agent versions the
// registry resolved, statuses, error codes, methods and status codes.
type Metrics struct {
	reg          *prometheus.Registry
	calls        *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	batches      prometheus.Histogram
	requests     *prometheus.CounterVec
	inFlight     prometheus.Gauge
	closedAtOpen prometheus.Gauge
}

// NewMetrics returns the metrics, registered.
func NewMetrics() *Metrics {
	m := &Metrics{
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

// WatchStore adds the families read from the store at each scrape;
// inMemory counts the calls whose hold the engine keeps in memory.
func (m *Metrics) WatchStore(s holon.Store, inMemory func() int) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "holon_holds_open",
			Help: "Holds open: calls reserved and not settled yet (in the store or in memory).",
		}, func() float64 {
			n, err := HoldsOpen(s, inMemory)
			if err != nil {
				return math.NaN()
			}
			return float64(n)
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

// ObserveCall counts a call the engine answered.
func (m *Metrics) ObserveCall(r *holon.Receipt, d time.Duration) {
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
func (m *Metrics) ObserveBatch(n int) { m.batches.Observe(float64(n)) }

// Handler serves the registry in the Prometheus text format. A collector
// that fails (a /proc file a sandbox hides, say) is logged and left out;
// the other families are still served.
func (m *Metrics) Handler(log *slog.Logger) http.Handler {
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

// Instrument serves MetricsPath in front of the API, and counts the API's
// requests. On a hosted gateway the metrics need the admin key: they name
// agents and show traffic.
func (m *Metrics) Instrument(api http.Handler, o Exposure) http.Handler {
	scrape := m.Handler(o.Log)
	var adminKey []byte
	if o.AdminKey != "" {
		adminKey = token.Sum(o.AdminKey)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == MetricsPath {
			if !o.Hosted {
				if err := o.CheckHost(r); err != nil {
					web.Answer(w, err)
					return
				}
			}
			if o.Hosted && !bearerMatches(r, adminKey) {
				web.Answer(w, holon.Errorf(web.CodeUnauthenticated,
					"GET %s needs the admin key: send it as Authorization: Bearer <key>, or scrape the --metrics-addr listener", MetricsPath))
				return
			}
			scrape.ServeHTTP(w, r)
			return
		}
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		cw := &web.CodeWriter{ResponseWriter: w}
		defer func() {
			code := cw.Code
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
	credential, ok := web.Bearer(r)
	return ok && token.Equal(credential, want)
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

// Exposure says who may scrape the metrics.
type Exposure struct {
	// Hosted puts the metrics behind the admin key.
	Hosted   bool
	AdminKey string
	// CheckHost refuses a request to a dev gateway for a name that is not
	// its own.
	CheckHost func(r *http.Request) error
	Log       *slog.Logger
}

// HoldsOpen counts the calls in flight: reserved, not settled, their
// holds in the store or, inMemory's count, in the engine's memory.
func HoldsOpen(s holon.Store, inMemory func() int) (int, error) {
	var n int
	err := s.View(func(tx holon.Tx) error {
		hs, err := tx.Holds()
		n = len(hs)
		return err
	})
	return n + inMemory(), err
}

// ClosedAtOpen records how many calls the last run left in flight, closed
// at this start.
func (m *Metrics) ClosedAtOpen(n int) { m.closedAtOpen.Set(float64(n)) }
