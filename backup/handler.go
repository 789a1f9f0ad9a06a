package backup

import (
	"net/http"
	"runtime/debug"

	"holon.dev/holon"
	"holon.dev/holon/kv"
	"holon.dev/holon/kv/pg"
)

// Handler streams a backup of the store as JSONL (the format of
// this package) from one read transaction, while the gateway keeps
// serving. It is the operator's: mount it behind the admin key only
// (GET /v0/admin/backup), since the copy holds every account and key. The
// response has no length; a copy cut short lacks its trailer, which
// `holon backup --url` and `holon restore` detect.
func Handler(store Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "backup: only GET", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Disposition", `attachment; filename="holon-backup.jsonl"`)
		if r.Method == http.MethodHead {
			return
		}
		ww := &startedWriter{w: w}
		if _, err := Write(ww, store, Options{Gateway: buildVersion(), Background: true}); err != nil {
			if !ww.started {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			// Part of the copy is out: cut the connection, so the client
			// sees an error as well as a missing trailer.
			panic(http.ErrAbortHandler)
		}
	})
}

// StoreHandler is Handler for a store that kv.OpenStore opened: what
// the wiring gives the appliance (appliance.Config.Backup). Any other
// store has no backup of this format: it answers 501.
func StoreHandler(s holon.Store) http.Handler {
	if ks := kv.Unwrap(s); ks != nil {
		return Handler(ks)
	}
	if ps, ok := s.(*pg.Store); ok {
		return Handler(PostgresSource(ps))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "backup: this store is not the embedded one; back it up with its own tools", http.StatusNotImplemented)
	})
}

// startedWriter remembers whether anything was written.
type startedWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	s.started = true
	return s.w.Write(p)
}

// buildVersion is the gateway's version as the Go toolchain recorded it.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}
