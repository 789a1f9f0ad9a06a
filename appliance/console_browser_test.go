package appliance_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Ensure that the console works in a real browser, one chromium for every
// subtest: the README's dev-mode walkthrough by clicking, and a hosted
// session from signup to moderation; on every main page axe-core finds no
// serious or critical violation and the CSP reports nothing; every request
// stays on the gateway's origin; the money checks pass after each.
func TestConsole_Browser(t *testing.T) {
	chromium, axe := needBrowser(t)
	browser := newHeadless(t, chromium)
	t.Run("dev walkthrough", func(t *testing.T) { consoleDevWalkthrough(t, browser, axe) })
	t.Run("hosted session", func(t *testing.T) { consoleHostedSession(t, browser, axe) })
	t.Run("author session", func(t *testing.T) { consoleAuthorSession(t, browser, axe) })
}

// The README's walkthrough: Alice's invoice pipeline, held for approval,
// approved, its receipt tree read, and the money seen moved.
func consoleDevWalkthrough(t *testing.T, browser context.Context, axe []byte) {
	ta := newTestApp(t, "", nil)
	tb := newTab(t, browser, ta.srv.URL, axe, "dev")

	tb.open("/console/")
	if got := tb.text(`[data-balance="alice"]`); got != "5.00" {
		t.Fatalf("alice's balance: %q, want 5.00", got)
	}
	tb.check("overview")
	// By keyboard: the first Tab reaches the skip link, shown when focused;
	// Enter on it moves focus to the page's content; the next Tab goes on
	// from there, to its first link.
	tb.step("tab to the skip link", chromedp.KeyEvent("\t"))
	if got := evalIn[string](tb, `document.activeElement.textContent + " " + (document.activeElement.getBoundingClientRect().left >= 0)`); got != "Skip to content true" {
		t.Errorf("first Tab: %q, want the visible skip link", got)
	}
	tb.step("follow it", chromedp.KeyEvent("\r"))
	if got := evalIn[string](tb, `document.activeElement.id`); got != "main" {
		t.Errorf("after the skip link focus is on %q, want main", got)
	}
	tb.step("tab into the content", chromedp.KeyEvent("\t"))
	if got := evalIn[bool](tb, `document.getElementById("main").contains(document.activeElement) && document.activeElement.tagName === "A" && getComputedStyle(document.activeElement).outlineStyle !== "none"`); !got {
		t.Error("the next Tab does not reach a link in the content with a visible focus outline")
	}

	tb.click(`a[href="/console/agents"]`)
	tb.check("catalogue")
	tb.click(`a[href="/console/agents/holon-labs/invoice-pipeline"]`)
	tb.fill(`#try-mandate`, "alice/bookkeeping-q4",
		`#try-input`, `{"text": "ACME Corp\nWidgets, 2, 10.00\nGadgets, 1, 25.50\nShipping, 1, 5.00"}`)
	tb.click(`#try-h + form button[type=submit]`)
	if got := tb.text(`[data-status]`); got != "pending_approval" {
		t.Fatalf("the pipeline's call: %q, want pending_approval (worst case 3.10 is above 1.00)", got)
	}
	tb.check("agent")

	tb.click(`[data-approval-link]`)
	if got := tb.text(`[data-worst-case]`); got != "3.10 EUR" {
		t.Errorf("worst case on the approval: %q", got)
	}
	tb.check("approval")
	tb.click(`form[action="/console/approvals/a1"] button`)
	if got := tb.text(`[data-status]`); got != "succeeded" {
		t.Fatalf("approve and run: %q", got)
	}
	if got := tb.text(`[data-total]`); got != "0.192 EUR" {
		t.Errorf("the run's total: %q, want 0.192 EUR", got)
	}

	tb.click(`[data-receipt-link]`)
	root := `[data-receipt="r2"] > dl `
	if own, down, total := tb.text(root+`[data-own]`), tb.text(root+`[data-downstream]`), tb.text(root+`[data-total]`); own != "0.10" || down != "0.092" || total != "0.192" {
		t.Errorf("root costs: own %s downstream %s total %s, want 0.10 + 0.092 = 0.192", own, down, total)
	}
	if got := tb.text(root + `[data-splits]`); got != "holon 0.01, holon-labs 0.09" {
		t.Errorf("root splits: %q", got)
	}
	if n := evalIn[int](tb, `document.querySelectorAll("[data-receipt]").length`); n != 3 {
		t.Errorf("the tree has %d nodes, want the run and its 2 children", n)
	}
	tb.check("receipt")

	tb.click(`a[href="/console/"]`)
	if got := tb.text(`[data-balance="alice"]`); got != "4.808" {
		t.Errorf("alice after the run: %q, want 4.808", got)
	}
	if got := tb.text(`.mandate:first-child [data-spent]`); got != "0.192" {
		t.Errorf("bookkeeping-q4 spent: %q, want 0.192", got)
	}
	tb.check("overview-after")
	tb.click(`a[href="/console/receipts"]`)
	tb.check("receipts")
	consoleSpendCharts(t, tb)

	// The recorder sees what the CSP refuses: an inline script is.
	evalIn[bool](tb, `document.body.appendChild(Object.assign(document.createElement("script"), {textContent: "window.__ran = 1"})) && true`)
	if csp := evalIn[[]string](tb, `window.__csp`); len(csp) != 1 || evalIn[bool](tb, `window.__ran === 1`) {
		t.Errorf("an inline script: CSP reported %v, want it refused and reported", csp)
	}
	if !tb.expectProblem("inline script") {
		t.Error("the browser console's CSP report of the inline script was not seen")
	}
	tb.sameOrigin()
}

// A hosted session: sign up by email, create a mandate (a bad amount comes
// back beside its field) and an agent key, an agent's call held for
// approval, approved in the console, its receipt tree read, the key
// revoked; then the operator signs in with the admin key and disables the
// account.
func consoleHostedSession(t *testing.T, browser context.Context, axe []byte) {
	ta := newHostedApp(t)
	tb := newTab(t, browser, ta.srv.URL, axe, "hosted")

	tb.open("/console/")
	if p := tb.path(); !strings.HasPrefix(p, "/console/signin") {
		t.Fatalf("signed out, the console opens %s, want the sign-in page", p)
	}
	tb.check("signin")
	// GitHub's callback lands on /console#login=<code>: the page trades the
	// code with POST /v0/auth/exchange (refused here: no GitHub app, a
	// made-up code) and takes it out of the address bar.
	tb.open("/console#login=made-up-code")
	if got := evalIn[string](tb, `new Promise(function (ok) {
		var n = 0, el = document.getElementById("exchange-status");
		(function wait() { if (/failed/.test(el.textContent) || ++n > 100) ok(el.textContent); else setTimeout(wait, 20); })();
	})`); !strings.HasPrefix(got, "GitHub sign-in failed") {
		t.Errorf("the #login exchange: status %q", got)
	}
	if h := evalIn[string](tb, `location.hash`); h != "" {
		t.Errorf("the one-time code stays in the address: %q", h)
	}
	tb.fill(`#handle`, "ada", `#email`, "ada@example.com")
	if status := tb.click(`form[action="/console/signup"] button`); status != http.StatusCreated {
		t.Fatalf("signup: status %d", status)
	}
	humanKey, agentKey := tb.value(`#human-key`), tb.value(`#agent-key`)
	if !strings.HasPrefix(humanKey, "hlk_h_") || !strings.HasPrefix(agentKey, "hlk_a_") {
		t.Fatalf("keys shown: %q %q", humanKey, agentKey)
	}
	if !strings.Contains(tb.text(`main`), "you will not see them again") || tb.text(`[data-copy="human-key"]`) != "Copy" {
		t.Error("the keys are not shown once with a copy button and a warning")
	}
	tb.check("keys-shown-once")
	tb.click(`main a.button`)
	if got := tb.text(`[data-balance="ada"]`); got != "5.00" {
		t.Fatalf("ada's balance: %q", got)
	}
	if strings.Contains(evalIn[string](tb, `document.documentElement.outerHTML`), humanKey) {
		t.Error("the overview shows the human key again")
	}
	tb.check("overview")

	// A mandate: a bad amount first, its message beside the field.
	tb.click(`a[href="/console/mandates"]`)
	tb.check("mandates")
	tb.click(`a[href="/console/mandates/new"]`)
	tb.fill(`#name`, "lab", `#total`, "ten euros", `#per_call`, "5.00", `#approval_above`, "0.50",
		`#allow_agents`, "holon-labs/*", `#allow_capabilities`, "*", `#max_depth`, "2")
	if status := tb.click(`form[action="/console/mandates"] button[type=submit]`); status != http.StatusBadRequest {
		t.Fatalf("bad total: status %d, want 400", status)
	}
	if msg := tb.text(`#total-error`); msg == "" || evalIn[string](tb, `document.getElementById("total").getAttribute("aria-invalid")`) != "true" {
		t.Fatalf("no message beside the total (page: %s)", tb.text("main"))
	}
	tb.check("mandate-new")
	tb.fill(`#total`, "10.00")
	tb.click(`form[action="/console/mandates"] button[type=submit]`)
	if p := tb.path(); p != "/console/mandates/ada/lab" {
		t.Fatalf("after creating the mandate: %s (%s)", p, tb.text("main"))
	}
	tb.step("ask in the client", chromedp.Click(chromedp.CSS(`#ask_in_client`), chromedp.NodeVisible))
	tb.click(`form[action="/console/keys"] button`)
	labKey := tb.value(`#new-key`)
	if !strings.HasPrefix(labKey, "hlk_a_") {
		t.Fatalf("new agent key: %q", labKey)
	}
	if got := tb.text(`section[aria-labelledby="keys-h"] tbody td:nth-child(2)`); got != "yes" {
		t.Errorf("the new key asks in its client: %q, want yes", got)
	}
	tb.check("mandate")

	// The agent calls: the pipeline's worst case, 3.10, is above 0.50.
	status, out := ta.as(labKey).do("POST", "/v0/calls", map[string]any{
		"agent": "holon-labs/invoice-pipeline",
		"input": map[string]any{"text": "ACME Corp\nWidgets, 2, 10.00\nGadgets, 1, 25.50\nShipping, 1, 5.00"},
	})
	if status != http.StatusAccepted {
		t.Fatalf("the agent's call: %d %v, want 202 pending approval", status, out)
	}
	approvalID := out["approval"].(map[string]any)["id"].(string)

	tb.click(`a[href="/console/approvals"]`)
	tb.check("approvals")
	tb.click(`a[href="/console/approvals/` + approvalID + `"]`)
	if tb.text(`[data-input]`) != "" {
		t.Error("the input is shown before it was asked for")
	}
	tb.click(`a[href$="?show=input"]`)
	if !strings.Contains(tb.text(`[data-input]`), "ACME Corp") {
		t.Errorf("the input on request: %q", tb.text(`[data-input]`))
	}
	tb.check("approval")
	tb.click(`input[value="run"] + button`)
	if got := tb.text(`[data-status]`); got != "succeeded" {
		t.Fatalf("approve and run: %q (%s)", got, tb.text("main"))
	}
	tb.click(`[data-receipt-link]`)
	rootID := strings.TrimPrefix(tb.path(), "/console/receipts/")
	root := `[data-receipt="` + rootID + `"] > dl `
	if own, down, total := tb.text(root+`[data-own]`), tb.text(root+`[data-downstream]`), tb.text(root+`[data-total]`); own != "0.10" || down != "0.092" || total != "0.192" {
		t.Errorf("root costs: own %s downstream %s total %s, want 0.10 + 0.092 = 0.192", own, down, total)
	}
	for _, child := range evalIn[[]string](tb, `[...document.querySelectorAll("[data-receipt] [data-receipt]")].map(n => n.querySelector("[data-billed]").textContent + " " + n.querySelector("[data-total]").textContent)`) {
		if child != "yes 0.012" && child != "yes 0.08" {
			t.Errorf("child receipt: %q, want billed 0.012 (text-tables) and 0.08 (company-lookup)", child)
		}
	}
	tb.check("receipt")
	tb.click(`a[href="/console/receipts"]`)
	tb.fill(`#f-status`, "succeeded")
	tb.click(`form[action="/console/receipts"] button`)
	if n := evalIn[int](tb, `document.querySelectorAll("table.receipts tbody tr").length`); n != 1 {
		t.Errorf("succeeded receipts of ada's root mandates: %d rows, want 1", n)
	}
	tb.check("receipts")
	tb.click(`a[href="/console/agents"]`)
	tb.check("catalogue")

	// Revoke the lab key: the agent is refused at once.
	tb.open("/console/mandates/ada/lab")
	tb.click(`form[action$="/revoke"] button`)
	if n := evalIn[int](tb, `document.querySelectorAll("form[action$='/revoke']").length`); n != 0 {
		t.Errorf("%d keys still listed after revoking", n)
	}
	if status, _ := ta.as(labKey).do("GET", "/v0/me", nil); status != http.StatusUnauthorized {
		t.Errorf("revoked key: %d, want 401", status)
	}
	tb.click(`form[action="/console/signout"] button`)

	// The operator.
	tb.fill(`#key`, testAdminKey)
	tb.click(`#signin-key button`)
	if p := tb.path(); p != "/console/operator" {
		t.Fatalf("operator signed in at %s", p)
	}
	tb.check("operator")
	tb.fill(`#reason-ada`, "spam calls")
	tb.click(`tr[data-account="ada"] button`)
	if got := tb.text(`tr[data-account="ada"] [data-state]`); got != "disabled: spam calls" {
		t.Errorf("ada after disabling: %q", got)
	}
	if status, _ := ta.as(humanKey).do("GET", "/v0/me", nil); status != http.StatusUnauthorized {
		t.Errorf("a disabled account's key: %d, want 401", status)
	}
	tb.sameOrigin()
}

// consoleSpendCharts reads the spend page after the walkthrough's run:
// alice's spend per day and under bookkeeping-q4 drawn as SVG columns,
// each beside a table whose total is the run's 0.192, the mandate's
// budget bar with it, and no script involved.
func consoleSpendCharts(t *testing.T, tb *tab) {
	tb.click(`a[href="/console/spend"]`)
	for _, fig := range []string{`[data-chart="spend-0"]`, `[data-chart="mandate-0-0"]`} {
		if got := tb.text(fig + ` tfoot td:nth-of-type(2)`); got != "0.192" {
			t.Errorf("%s: the table's total charged %q, want 0.192", fig, got)
		}
		cols := evalIn[[]float64](tb, `Array.from(document.querySelectorAll('`+fig+` svg rect.col')).map(r => r.getBBox().height)`)
		drawn := 0
		for _, h := range cols {
			if h > 0 {
				drawn++
			}
		}
		if len(cols) != 30 || drawn != 1 {
			t.Errorf("%s: %d columns, %d drawn; want 30 days, the run's day drawn", fig, len(cols), drawn)
		}
		if name := evalIn[string](tb, `document.querySelector('`+fig+` svg').getAttribute("aria-label")`); !strings.Contains(name, "0.192 charged") {
			t.Errorf("%s: the chart's accessible name %q", fig, name)
		}
	}
	if got := tb.text(`#ms-alice\/bookkeeping-q4 a`); got != "alice/bookkeeping-q4" {
		t.Errorf("the mandate's chart heading: %q", got)
	}
	if n := evalIn[int](tb, `document.querySelectorAll("main script").length`); n != 0 {
		t.Errorf("the spend page has %d scripts", n)
	}
	tb.check("spend")
}
