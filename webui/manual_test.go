package webui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/webui"
)

// devBackend is a dev gateway with nothing in it: enough for pages that
// read no state, such as the manual's.
type devBackend struct{}

func (devBackend) Hosted() bool         { return false }
func (devBackend) GitHubSignIn() bool   { return false }
func (devBackend) Origin() *origin.Rule { return origin.New("", false) }
func (devBackend) Viewer(*http.Request) (webui.Viewer, error) {
	return webui.Viewer{Kind: webui.ViewerDev}, nil
}
func (devBackend) Do(*http.Request, string, string, any, any) error { return nil }
func (devBackend) Send(*http.Request, string, string, string, io.Reader, any) error {
	return nil
}
func (devBackend) SignIn(http.ResponseWriter, *http.Request, string) (webui.Viewer, error) {
	return webui.Viewer{}, nil
}
func (devBackend) SignOut(http.ResponseWriter, *http.Request) error { return nil }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	return w.Code, w.Body.String()
}

var (
	hrefRe = regexp.MustCompile(`(?:href|src)="([^"]*)"`)
	idRe   = regexp.MustCompile(`id="([^"]*)"`)
)

// Ensure that the console serves every page of the manual and the README,
// links to the manual from its pages, and that every link between them
// leads to a page the console serves, to an anchor that page has.
func TestManual_Served(t *testing.T) {
	c, err := webui.New(devBackend{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob("manual/*.md")
	if err != nil || len(pages) < 12 {
		t.Fatalf("manual pages: %v %v", pages, err)
	}
	seen := map[string]string{}
	queue := []string{webui.ManualPrefix, webui.ManualPrefix + "readme"}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if _, ok := seen[p]; ok {
			continue
		}
		status, body := get(t, c, p)
		if status != http.StatusOK {
			t.Errorf("GET %s: %d", p, status)
			continue
		}
		seen[p] = body
		if strings.HasSuffix(p, ".png") {
			continue
		}
		if !strings.Contains(body, `href="`+webui.ManualPrefix+`"`) {
			t.Errorf("GET %s: no link to the manual", p)
		}
		for _, m := range hrefRe.FindAllStringSubmatch(body, -1) {
			link, _, _ := strings.Cut(m[1], "#")
			if strings.HasPrefix(link, webui.ManualPrefix) {
				queue = append(queue, link)
			}
		}
	}
	for _, f := range pages {
		name := strings.TrimSuffix(filepath.Base(f), ".md")
		if name == "README" {
			name = ""
		}
		if _, ok := seen[webui.ManualPrefix+name]; !ok {
			t.Errorf("%s: not reachable from the manual's index", f)
		}
	}
	// Every anchor a page links to is an id of its target.
	for p, body := range seen {
		for _, m := range hrefRe.FindAllStringSubmatch(body, -1) {
			link, frag, ok := strings.Cut(m[1], "#")
			if !ok || !strings.HasPrefix(link, webui.ManualPrefix) && link != "" {
				continue
			}
			if link == "" {
				link = p
			}
			ids := map[string]bool{}
			for _, id := range idRe.FindAllStringSubmatch(seen[link], -1) {
				ids[id[1]] = true
			}
			if !ids[frag] {
				t.Errorf("%s links to %s#%s, which has no such anchor", p, link, frag)
			}
		}
	}
	if status, _ := get(t, c, webui.ManualPrefix+"nothing"); status != http.StatusNotFound {
		t.Errorf("GET an unknown page: %d, want 404", status)
	}
	if _, body := get(t, c, webui.Prefix+"/"); !strings.Contains(body, `href="`+webui.ManualPrefix+`"`) {
		t.Errorf("the overview has no link to the manual")
	}
}

// Ensure that the manual reads on a code forge as it is: every relative
// link of its markdown and of the README names a file of the repository,
// and nothing points outside it (a workspace's ../shared, a design
// document's section).
func TestManual_Links(t *testing.T) {
	files, _ := filepath.Glob("manual/*.md")
	files = append(files, "../README.md")
	linkRe := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	outside := regexp.MustCompile(`\.\./shared|§|spec/|gateway\.md|mandate\.md|manifest\.md|evals\.md`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := outside.Find(b); m != nil {
			t.Errorf("%s points outside the repository: %q", f, m)
		}
		for _, m := range linkRe.FindAllStringSubmatch(string(b), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				t.Errorf("%s links to %s: %v", f, m[1], err)
			}
		}
	}
	b, _ := os.ReadFile("../README.md")
	if n := strings.Count(string(b), "\n"); n > 250 {
		t.Errorf("README.md has %d lines: a front door holds at most 250; move the rest into a page of the manual", n)
	}
}
