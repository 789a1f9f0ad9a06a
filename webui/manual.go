package webui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"holon.dev/holon"
)

// ManualPrefix is where the console serves the manual.
const ManualPrefix = Prefix + "/manual/"

// manualFS holds the manual's pages: markdown files readable as they are
// on a code forge, rendered here for the console. console.png is the
// picture the console's page shows, spend.png the README's.
//
//go:embed manual/*.md console.png spend.png
var manualFS embed.FS

// manualFigures are the pictures of the manual and the README (in webui/).
var manualFigures = []string{"console.png", "spend.png"}

// manual is the manual rendered once, at start: page name → HTML. The
// index is "" (manual/README.md) and the repository's README is "readme".
type manual struct {
	pages map[string]manualPage
	// figures are the pictures the pages show, by file name.
	figures map[string][]byte
}

// manualPage is one rendered page.
type manualPage struct {
	Title string
	HTML  template.HTML
}

// loadManual renders every page of the manual and the README.
func loadManual() (*manual, error) {
	m := &manual{pages: map[string]manualPage{}}
	files, err := fs.Glob(manualFS, "manual/*.md")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		src, err := manualFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(path.Base(f), ".md")
		if name == "README" {
			name = ""
		}
		if m.pages[name], err = renderMarkdown("webui/"+f, src); err != nil {
			return nil, fmt.Errorf("manual %s: %w", f, err)
		}
	}
	if m.pages["readme"], err = renderMarkdown("README.md", []byte(holon.README())); err != nil {
		return nil, fmt.Errorf("README.md: %w", err)
	}
	m.figures = map[string][]byte{}
	for _, name := range manualFigures {
		if m.figures[name], err = manualFS.ReadFile(name); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// renderMarkdown renders one markdown file (GitHub's flavour: tables,
// autolinks; raw HTML is left out) whose repository path is file, with
// its links to other pages of the manual pointed at the console's.
func renderMarkdown(file string, src []byte) (manualPage, error) {
	md := goldmark.New(
		goldmark.WithExtensions(extension.GFM),
		goldmark.WithParserOptions(
			parser.WithAutoHeadingID(),
			parser.WithASTTransformers(util.Prioritized(linkRewriter{dir: path.Dir(file)}, 100)),
		),
	)
	doc := md.Parser().Parse(text.NewReader(src))
	title := ""
	if h, ok := doc.FirstChild().(*ast.Heading); ok && h.Level == 1 {
		title = string(h.Lines().Value(src))
	}
	var buf bytes.Buffer
	if err := md.Renderer().Render(&buf, src, doc); err != nil {
		return manualPage{}, err
	}
	return manualPage{Title: title, HTML: template.HTML(buf.String())}, nil
}

// linkRewriter points a page's relative links, written as repository
// paths for a code forge, at the console's pages.
type linkRewriter struct{ dir string }

// Transform rewrites every link and image destination of doc.
func (l linkRewriter) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			n.Destination = []byte(manualURL(l.dir, string(n.Destination)))
		case *ast.Image:
			n.Destination = []byte(manualURL(l.dir, string(n.Destination)))
		}
		return ast.WalkContinue, nil
	})
}

// manualURL is where a link of a file in dir leads in the console: a page
// of the manual, the README, the console's picture, or the link as it is
// (an absolute URL, an anchor, a file the console does not serve).
func manualURL(dir, dest string) string {
	target, frag, _ := strings.Cut(dest, "#")
	if target == "" || strings.Contains(target, ":") || strings.HasPrefix(target, "/") {
		return dest
	}
	if frag != "" {
		frag = "#" + frag
	}
	switch p := path.Join(dir, target); {
	case p == "README.md":
		return ManualPrefix + "readme" + frag
	case p == "webui/manual/README.md":
		return ManualPrefix + frag
	case p == "webui/manual/openapi.yaml":
		return OpenAPIPath
	case path.Dir(p) == "webui" && slices.Contains(manualFigures, path.Base(p)):
		return ManualPrefix + path.Base(p)
	case path.Dir(p) == "webui/manual" && path.Ext(p) == ".md":
		return ManualPrefix + strings.TrimSuffix(path.Base(p), ".md") + frag
	}
	return dest
}

// manualFailed answers a request for the manual when an embedded page
// did not render (a build defect, which the tests catch).
func (c *Console) manualFailed(w http.ResponseWriter, r *http.Request, v Viewer, err error) {
	c.log.Error("render the manual", "err", err)
	c.render(w, r, v, http.StatusInternalServerError, "error", errorPage{Title: "The manual is broken", Message: "This gateway's manual did not render: its log says why."})
}

// routeManual serves the manual to anyone, signed in or not.
func (c *Console) routeManual() {
	for _, name := range manualFigures {
		c.mux.HandleFunc("GET "+ManualPrefix+name, func(w http.ResponseWriter, r *http.Request) {
			m, err := c.manual()
			if err != nil {
				c.manualFailed(w, r, Viewer{}, err)
				return
			}
			w.Header().Set("Content-Type", "image/png")
			w.Header().Set("Cache-Control", "public, max-age=3600")
			_, _ = w.Write(m.figures[name])
		})
	}
	c.mux.Handle("GET "+ManualPrefix+"{page...}", c.public(func(w http.ResponseWriter, r *http.Request, v Viewer) {
		m, err := c.manual()
		if err != nil {
			c.manualFailed(w, r, v, err)
			return
		}
		p, ok := m.pages[r.PathValue("page")]
		if !ok {
			c.render(w, r, v, http.StatusNotFound, "error", errorPage{Title: "Not found", Message: "The manual has no page " + r.URL.Path + "."})
			return
		}
		c.render(w, r, v, http.StatusOK, "manual", p)
	}))
}
