package appliance_test

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// receiptIDs lists the ids of a GET /v0/receipts answer.
func receiptIDs(out map[string]any) string {
	var ids []string
	list, _ := out["receipts"].([]any)
	for _, r := range list {
		ids = append(ids, r.(map[string]any)["id"].(string))
	}
	return strings.Join(ids, ",")
}

// Ensure that GET /v0/receipts filters by status, billed, agent and dates
// (a date meaning its whole day), pages a filtered list by its cursor, and
// refuses a bad filter with a message.
func TestReceipts_Filters(t *testing.T) {
	clock := &fixedClock{now: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	ta := newTestApp(t, "", clock.Now)
	call := func(name string) {
		ta.do("POST", "/v0/calls", map[string]any{"mandate": "alice/sandbox", "agent": "holon-labs/company-lookup", "input": map[string]any{"name": name}})
	}
	call("acme corp")   // r1
	call("globex gmbh") // r2
	call("nobody inc")  // r3: not found, not billed
	clock.mu.Lock()
	clock.now = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	clock.mu.Unlock()
	call("acme corp")  // r4
	call("nobody inc") // r5

	_, all := ta.do("GET", "/v0/receipts", nil)
	if got := receiptIDs(all); got != "r5,r4,r3,r2,r1" {
		t.Fatalf("all receipts: %s", got)
	}
	failed := all["receipts"].([]any)[0].(map[string]any)["status"].(string)
	for _, c := range []struct{ query, want string }{
		{"status=succeeded", "r4,r2,r1"},
		{"status=" + failed, "r5,r3"},
		{"billed=false", "r5,r3"},
		{"billed=true&status=succeeded", "r4,r2,r1"},
		{"agent=holon-labs/company-lookup", "r5,r4,r3,r2,r1"},
		{"agent=holon-labs/company-lookup@1.0.0", "r5,r4,r3,r2,r1"},
		{"agent=holon-labs/company", ""},
		{"until=2026-11-01", "r3,r2,r1"},
		{"until=2026-11-02T00:00:00Z&status=succeeded", "r2,r1"},
		{"since=2026-11-02", "r5,r4"},
		{"since=2026-11-02&billed=false", "r5"},
		{"until=2026-10-31", ""},
		{"mandate=alice/sandbox&status=succeeded", "r4,r2,r1"},
		{"mandate=alice/bookkeeping-q4&status=succeeded", ""},
	} {
		status, out := ta.do("GET", "/v0/receipts?"+c.query, nil)
		if status != http.StatusOK || receiptIDs(out) != c.want {
			t.Errorf("?%s: %d %s, want %s", c.query, status, receiptIDs(out), c.want)
		}
	}
	// A filtered page has a cursor: one succeeded receipt at a time.
	_, page := ta.do("GET", "/v0/receipts?status=succeeded&limit=1", nil)
	if receiptIDs(page) != "r4" || page["next"] != "r4" {
		t.Fatalf("first page: %s next %v", receiptIDs(page), page["next"])
	}
	_, page = ta.do("GET", "/v0/receipts?status=succeeded&limit=1&before=r4", nil)
	if receiptIDs(page) != "r2" || page["next"] != "r2" {
		t.Errorf("second page: %s next %v", receiptIDs(page), page["next"])
	}
	_, page = ta.do("GET", "/v0/receipts?status=rejected", nil)
	if page["scanned"] != float64(5) || page["next"] != "" {
		t.Errorf("a filter matching nothing: scanned %v next %v, want 5 and the end", page["scanned"], page["next"])
	}
	for _, q := range []string{"billed=maybe", "since=yesterday", "until=2026-13-01"} {
		status, out := ta.do("GET", "/v0/receipts?"+q, nil)
		if status != http.StatusBadRequest || errorCode(out) != "invalid_request" {
			t.Errorf("?%s: %d %v, want 400 invalid_request", q, status, out)
		}
	}

	// The console's CSV export has the same rows.
	resp, err := http.Get(ta.srv.URL + "/console/receipts.csv?" + url.Values{"status": {"succeeded"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Errorf("CSV content type %q", ct)
	}
	b, _ := io.ReadAll(resp.Body)
	rows, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil || len(rows) != 4 {
		t.Fatalf("CSV: %d rows (%v):\n%s", len(rows), err, b)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	var got []string
	for _, r := range rows[1:] {
		got = append(got, fmt.Sprintf("%s %s %s %s", r[col["id"]], r[col["status"]], r[col["total"]], r[col["splits"]]))
	}
	if want := "r4 succeeded 0.08 holon=0.008 holon-labs=0.072|r2 succeeded 0.08 holon=0.008 holon-labs=0.072|r1 succeeded 0.08 holon=0.008 holon-labs=0.072"; strings.Join(got, "|") != want {
		t.Errorf("CSV rows:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}
