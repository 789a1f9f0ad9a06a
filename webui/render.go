package webui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"holon.dev/holon/journal"
)

//go:embed templates
var templateFS embed.FS

// page is one page's template set: the layout and the page's own file.
type page struct {
	t *template.Template
}

// view is what every page template gets: who is looking, the form token,
// and the page's own data.
type view struct {
	Viewer Viewer
	Hosted bool
	CSRF   string
	// Nav names the menu entry of the page (it gets aria-current).
	Nav  string
	Data any
}

func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		"asset":  c.assets.url,
		"amount": func(a journal.Amount) string { return a.String() },
		"amountp": func(a *journal.Amount) string {
			if a == nil {
				return "—"
			}
			return a.String()
		},
		"str": func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		},
		"when": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		// local is a time in its own zone (a budget window's end, in the
		// mandate's time zone); rfc3339 the same for a datetime attribute.
		"local":   func(t time.Time) string { return t.Format("2006-01-02 15:04 -07:00") },
		"rfc3339": func(t time.Time) string { return t.Format(time.RFC3339) },
		"whenp": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"join": strings.Join,
		"add":  func(a, b int) int { return a + b },
		"list": func(xs ...string) []string { return xs },
		"deref": func(p any) any {
			switch v := p.(type) {
			case *bool:
				return v != nil && *v
			case *int:
				if v == nil {
					return 0
				}
				return *v
			}
			return p
		},
		"bar":    newBar,
		"pathOf": mandatePath,
		"dict": func(kv ...any) (map[string]any, error) {
			if len(kv)%2 != 0 {
				return nil, fmt.Errorf("dict wants pairs")
			}
			m := map[string]any{}
			for i := 0; i < len(kv); i += 2 {
				k, ok := kv[i].(string)
				if !ok {
					return nil, fmt.Errorf("dict key %v is not a string", kv[i])
				}
				m[k] = kv[i+1]
			}
			return m, nil
		},
	}
}

func (c *Console) loadPages() (map[string]*page, error) {
	base, err := template.New("layout.html").Funcs(c.funcs()).ParseFS(templateFS, "templates/layout.html", "templates/partials.html")
	if err != nil {
		return nil, err
	}
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*page{}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if name == "layout" || name == "partials" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, f)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", f, err)
		}
		pages[name] = &page{t: t}
	}
	return pages, nil
}

// render writes a page. It renders into a buffer first, so a template
// error never leaves half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, v Viewer, status int, name string, data any) {
	p, ok := c.pages[name]
	if !ok {
		c.log.Error("console: no template", "name", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	nav, _, _ := strings.Cut(name, "_")
	vw := view{Viewer: v, Hosted: c.b.Hosted(), CSRF: CSRFToken(w, r, c.b.Origin()), Nav: nav, Data: data}
	var buf bytes.Buffer
	if err := p.t.ExecuteTemplate(&buf, "layout.html", vw); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if w.Header().Get("Cache-Control") == "" {
		w.Header().Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// bar is a budget drawn as three segments (spent, reserved, remaining),
// in per mille of the total so that no float touches wire.Money.
type bar struct {
	Spent, Reserved, Remaining int64
	// SpentX and ReservedX are where the second and third segments start.
	SpentX, ReservedX int64
}

func newBar(spent, reserved, remaining journal.Amount) bar {
	total := spent.Micros() + reserved.Micros() + max(remaining.Micros(), 0)
	if total <= 0 {
		return bar{Remaining: 1000}
	}
	per := func(a int64) int64 { return a * 1000 / total }
	b := bar{Spent: per(spent.Micros()), Reserved: per(reserved.Micros())}
	b.Remaining = 1000 - b.Spent - b.Reserved
	b.SpentX, b.ReservedX = b.Spent, b.Spent+b.Reserved
	return b
}

// mandatePath is a mandate's page.
func mandatePath(id string) string { return Prefix + "/mandates/" + id }
