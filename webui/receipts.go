package webui

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/journal"
)

// receiptFilters are the filters of the receipts page, passed on to GET
// /v0/receipts as they are: the API checks them.
var receiptFilters = []string{"mandate", "agent", "status", "billed", "since", "until"}

type receiptsPage struct {
	Receipts []*holon.Receipt
	Filter   map[string]string
	// Next is the link to the older page; Scanned says how far a filter
	// read when the page is short.
	Next    string
	Scanned int
	CSV     string
}

// receiptQuery is the API query of the request's filters, cursor and limit.
func receiptQuery(r *http.Request, limit int) (url.Values, map[string]string) {
	q := url.Values{}
	filter := map[string]string{}
	for _, k := range receiptFilters {
		if v := strings.TrimSpace(r.URL.Query().Get(k)); v != "" {
			q.Set(k, v)
			filter[k] = v
		}
	}
	if b := r.URL.Query().Get("before"); b != "" {
		q.Set("before", b)
	}
	q.Set("limit", strconv.Itoa(limit))
	return q, filter
}

// receiptList is the receipts page: 50 at a time, newest first, read by
// the store's cursors.
func (c *Console) receiptList(w http.ResponseWriter, r *http.Request, v Viewer) {
	q, filter := receiptQuery(r, 50)
	var rp wire.ReceiptPage
	if err := c.b.Do(r, "GET", "/v0/receipts?"+q.Encode(), nil, &rp); err != nil {
		c.fail(w, r, v, err)
		return
	}
	p := receiptsPage{Receipts: rp.Receipts, Filter: filter, Scanned: rp.Scanned}
	link := url.Values{}
	for k, val := range filter {
		link.Set(k, val)
	}
	p.CSV = Prefix + "/receipts.csv?" + link.Encode()
	if rp.Next != "" {
		link.Set("before", rp.Next)
		p.Next = Prefix + "/receipts?" + link.Encode()
	}
	c.render(w, r, v, http.StatusOK, "receipts", p)
}

// maxCSVRows bounds one export.
const maxCSVRows = 100_000

// receiptCSV exports the filtered receipts as CSV, page by page.
func (c *Console) receiptCSV(w http.ResponseWriter, r *http.Request, v Viewer) {
	q, _ := receiptQuery(r, 500)
	var first wire.ReceiptPage
	if err := c.b.Do(r, "GET", "/v0/receipts?"+q.Encode(), nil, &first); err != nil {
		c.fail(w, r, v, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="receipts.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"id", "parent", "created", "mandate", "caller", "agent", "status", "error", "approval", "billed",
		"worst_case", "own", "downstream", "total", "currency", "payer", "splits", "children", "duration_ms"})
	rows := 0
	for page := &first; ; {
		for _, rc := range page.Receipts {
			var splits []string
			for _, s := range rc.Splits {
				splits = append(splits, s.To+"="+s.Amount.String())
			}
			_ = cw.Write([]string{rc.ID, str(rc.Parent), rc.Created.UTC().Format("2006-01-02T15:04:05.000Z"), rc.Mandate, rc.Caller,
				str(rc.Agent), rc.Status, str(rc.Error), str(rc.Approval), strconv.FormatBool(rc.Billed), amountOrEmpty(rc.WorstCase),
				rc.Cost.Own.String(), rc.Cost.Downstream.String(), rc.Cost.Total.String(), rc.Currency, rc.Payer,
				strings.Join(splits, " "), strings.Join(rc.Children, " "), strconv.FormatInt(rc.DurationMS, 10)})
			rows++
		}
		if page.Next == "" || rows >= maxCSVRows {
			break
		}
		q.Set("before", page.Next)
		next := new(wire.ReceiptPage)
		if err := c.b.Do(r, "GET", "/v0/receipts?"+q.Encode(), nil, next); err != nil {
			c.log.Error("receipts export", "err", err)
			break // the rows written stand; the file ends short
		}
		page = next
	}
	cw.Flush()
}

type treePage struct {
	Tree *wire.ReceiptTree
	// CanRefund offers the refund form (refunds.go).
	CanRefund bool
}

// receiptView is a receipt with its whole tree: status, billed, own,
// downstream and total cost, and splits at every node.
func (c *Console) receiptView(w http.ResponseWriter, r *http.Request, v Viewer) {
	var t wire.ReceiptTree
	if err := c.b.Do(r, "GET", apiPath("/v0/receipts", r.PathValue("id")), nil, &t); err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.render(w, r, v, http.StatusOK, "receipts_view", treePage{Tree: &t, CanRefund: canRefund(v, t.Receipt, t.Refunds)})
}

func amountOrEmpty(a *journal.Amount) string {
	if a == nil {
		return ""
	}
	return a.String()
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
