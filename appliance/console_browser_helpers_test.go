package appliance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"holon.dev/holon/appliance/npmtest"
)

// axeDir pins axe-core (webui/testdata/axe/package-lock.json).
const axeDir = "../webui/testdata/axe"

// screenshotDir receives the pages at desktop and phone width (ignored by
// git).
const screenshotDir = "testdata/screenshots"

// needBrowser finds Debian's chromium and axe-core, or skips saying what
// to install; with HOLON_TEST_STRICT=1 (as in CI) it fails instead.
func needBrowser(t *testing.T) (chromium string, axe []byte) {
	t.Helper()
	missing := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	err := os.ErrNotExist
	if chromium != "" {
		// Installed from its lockfile into the user's cache, once.
		axe, err = os.ReadFile(filepath.Join(npmtest.Install(t, axeDir), "axe-core", "axe.min.js"))
	}
	switch {
	case chromium == "":
		missing = "chromium is not installed (apt-get install chromium)"
	case err != nil:
		missing = "axe-core is not installed: run npm ci in webui/testdata/axe"
	}
	if missing == "" {
		return chromium, axe
	}
	if strings.TrimSpace(os.Getenv("HOLON_TEST_STRICT")) == "1" {
		t.Fatal(missing + " (HOLON_TEST_STRICT=1: failing instead of skipping)")
	}
	t.Skip(missing + " (skipped; HOLON_TEST_STRICT=1 makes this fail)")
	return "", nil
}

// newHeadless starts one headless chromium for a test, with the flags
// that keep it off the network (NOTES.md), and returns its context.
func newHeadless(t *testing.T, chromium string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.WindowSize(1280, 900),
	)
	// The whole browser's budget: a hung browser ends the test. Each step
	// has its own deadline (20 to 30 s); this one only has to outlast a
	// whole test on a loaded machine (TestConsole_Browser takes about
	// 3 minutes at a load of 25 on 2 cores).
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browserCtx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return browserCtx
}

// tab is one browser tab in a browser context of its own (its own
// cookies), recording every request it makes and every Content-Security-
// Policy violation and console error it sees.
type tab struct {
	t      *testing.T
	ctx    context.Context
	origin string
	axe    []byte
	name   string

	mu       sync.Mutex
	requests []string
	problems []string
	checked  map[string]bool
}

// cspRecorder runs before any script of every page: it keeps the CSP
// violations the page reports.
const cspRecorder = `window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + e.blockedURI);
});`

func newTab(t *testing.T, browser context.Context, origin string, axe []byte, name string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tb := &tab{t: t, ctx: ctx, origin: origin, axe: axe, name: name, checked: map[string]bool{}}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	logs := chromedp.Events(ctx, log.EntryAdded)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range requests {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.requests = append(tb.requests, ev.Request.URL)
			tb.mu.Unlock()
		}
	}()
	go func() {
		for ev, err := range logs {
			if err != nil {
				return
			}
			e := ev.Entry
			// A page answered 4xx on purpose (a form sent back with its
			// errors) logs a network error: that is not a page's problem.
			if e.Level == log.EntryLevelError && e.Source != log.EntrySourceNetwork {
				tb.mu.Lock()
				tb.problems = append(tb.problems, fmt.Sprintf("browser console %s: %s (%s)", e.Source, e.Text, e.URL))
				tb.mu.Unlock()
			}
		}
	}()
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			// The console asks before destructive actions: say yes.
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder}); err != nil {
		t.Fatal(err)
	}
	return tb
}

// step runs actions with a bound, failing the test on error.
func (tb *tab) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// open loads a console path and wants status 200.
func (tb *tab) open(path string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(tb.origin+path))
	if err != nil {
		tb.t.Fatalf("open %s: %v", path, err)
	}
	if resp.Status != 200 {
		tb.t.Fatalf("open %s: status %d", path, resp.Status)
	}
}

// click clicks what sel finds and waits for the page it loads; it
// returns the status of that page.
func (tb *tab) click(sel string) int64 {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		tb.t.Fatalf("click %s: %v", sel, err)
	}
	return resp.Status
}

// fill sets form fields by CSS selector.
func (tb *tab) fill(fields ...string) {
	tb.t.Helper()
	var actions []chromedp.Action[chromedp.Void]
	for i := 0; i+1 < len(fields); i += 2 {
		actions = append(actions, chromedp.SetValue(chromedp.CSS(fields[i]), fields[i+1]))
	}
	tb.step("fill the form", actions...)
}

// eval evaluates JavaScript in the page.
func evalIn[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the trimmed text of the first element sel finds ("" if none).
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	q, _ := json.Marshal(sel)
	return strings.TrimSpace(evalIn[string](tb, fmt.Sprintf(`(document.querySelector(%s) || {textContent: ""}).textContent`, q)))
}

// value is the value of the form field sel finds.
func (tb *tab) value(sel string) string {
	tb.t.Helper()
	q, _ := json.Marshal(sel)
	return evalIn[string](tb, fmt.Sprintf(`(document.querySelector(%s) || {value: ""}).value`, q))
}

func (tb *tab) path() string {
	return strings.TrimPrefix(evalIn[string](tb, `location.pathname + location.search`), tb.origin)
}

// axeViolation is one rule axe-core found broken.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any `json:"target"`
	} `json:"nodes"`
}

// check is what every main page goes through: axe-core finds no serious
// or critical violation, the page reported no CSP violation, and it is
// photographed at desktop and at phone width.
func (tb *tab) check(name string) {
	tb.t.Helper()
	tb.checked[name] = true
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if !evalIn[bool](tb, `typeof axe !== "undefined"`) {
		// Injected by the debugger, not by the page: the page's CSP
		// allows no such script, and needs not to.
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](string(tb.axe))); err != nil {
			tb.t.Fatalf("inject axe-core: %v", err)
		}
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations)`, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("axe on %s: %v", name, err)
	}
	var vs []axeViolation
	if err := json.Unmarshal(raw, &vs); err != nil {
		tb.t.Fatalf("axe on %s: %v", name, err)
	}
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			tb.t.Errorf("%s: axe %s violation %s (%s) at %v", name, v.Impact, v.ID, v.Help, v.Nodes)
		}
	}
	if csp := evalIn[[]string](tb, `window.__csp || []`); len(csp) > 0 {
		tb.t.Errorf("%s: CSP violations: %v", name, csp)
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	for _, size := range []struct {
		suffix        string
		width, height int64
		mobile        bool
	}{{"desktop", 1280, 900, false}, {"phone", 390, 844, true}} {
		emulate := chromedp.EmulateViewport(size.width, size.height)
		if size.mobile {
			emulate = chromedp.EmulateViewport(size.width, size.height, chromedp.EmulateMobile)
		}
		shot, err := chromedp.Run(ctx, chromedp.Action[[]byte](func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
			if _, err := emulate(ctx, t); err != nil {
				return nil, err
			}
			return chromedp.FullScreenshot(100)(ctx, t)
		}))
		if err != nil {
			tb.t.Fatalf("screenshot %s: %v", name, err)
		}
		file := filepath.Join(screenshotDir, fmt.Sprintf("%s-%s-%s.png", tb.name, name, size.suffix))
		if err := os.WriteFile(file, shot, 0o644); err != nil {
			tb.t.Fatal(err)
		}
	}
	tb.step("desktop width again", chromedp.EmulateViewport(1280, 900))
}

// expectProblem waits a moment for a console problem containing text,
// and takes it off the list: it was provoked on purpose.
func (tb *tab) expectProblem(text string) bool {
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		tb.mu.Lock()
		for i, p := range tb.problems {
			if strings.Contains(p, text) {
				tb.problems = append(tb.problems[:i], tb.problems[i+1:]...)
				tb.mu.Unlock()
				return true
			}
		}
		tb.mu.Unlock()
	}
	return false
}

// sameOrigin fails the test for every request the tab made to anywhere
// but the gateway, and for every problem the browser's console showed.
func (tb *tab) sameOrigin() {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.requests) < 10 {
		tb.t.Errorf("only %d requests recorded: the recorder is not working", len(tb.requests))
	}
	for _, u := range tb.requests {
		if u == "about:blank" || strings.HasPrefix(u, "data:") {
			continue // nothing leaves the browser (a date field's own icon is a data: URL)
		}
		if !strings.HasPrefix(u, tb.origin+"/") {
			tb.t.Errorf("a request left the gateway's origin %s: %s", tb.origin, u)
		}
	}
	for _, p := range tb.problems {
		tb.t.Errorf("%s", p)
	}
}
