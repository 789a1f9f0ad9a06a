package v0

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
)

// maxFilterScan bounds the receipts one filtered page reads: a filter that
// matches little answers a short page and a cursor to go on from, instead
// of reading a million receipts in one request.
const maxFilterScan = 5000

// receiptFilter is the optional part of GET /v0/receipts: agent (an id, or
// an exact ns/name@version), status, billed, and a time window. Receipts
// are numbered in the order calls start (to within the engine's
// ReceiptOrderSkew), so the window is found by binary search on the
// numbers and ends the scan early, never read through.
type receiptFilter struct {
	agent, status string
	billed        *bool
	since, until  time.Time
}

func parseReceiptFilter(q url.Values) (receiptFilter, error) {
	var f receiptFilter
	f.agent, f.status = q.Get("agent"), q.Get("status")
	switch q.Get("billed") {
	case "":
	case "true":
		t := true
		f.billed = &t
	case "false":
		b := false
		f.billed = &b
	default:
		return f, holon.Errorf(holon.CodeInvalidRequest, "billed must be true or false")
	}
	for _, w := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.since}, {"until", &f.until}} {
		s := q.Get(w.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			if t, err = time.Parse("2006-01-02", s); err != nil {
				return f, holon.Errorf(holon.CodeInvalidRequest, "%s must be a date (2026-12-01) or an RFC 3339 time (2026-12-01T10:00:00Z)", w.name)
			}
			if w.name == "until" {
				t = t.Add(24 * time.Hour) // a date means the whole day
			}
		}
		*w.to = t
	}
	return f, nil
}

func (f receiptFilter) empty() bool {
	return f.agent == "" && f.status == "" && f.billed == nil && f.since.IsZero() && f.until.IsZero()
}

func (f receiptFilter) keep(r *holon.Receipt) bool {
	if f.status != "" && r.Status != f.status {
		return false
	}
	if f.billed != nil && r.Billed != *f.billed {
		return false
	}
	if f.agent != "" {
		if r.Agent == nil || (*r.Agent != f.agent && !strings.HasPrefix(*r.Agent, f.agent+"@")) {
			return false
		}
	}
	return (f.until.IsZero() || r.Created.Before(f.until)) && (f.since.IsZero() || !r.Created.Before(f.since))
}

// filteredReceipts pages through fetch (newest first) keeping what the
// filter keeps, reading at most maxFilterScan receipts. Next is set when
// there is more to read, even if the page is short.
func filteredReceipts(e *gateway.Engine, f receiptFilter, before string, limit int, fetch func(before string, limit int) (holon.ReceiptPage, error)) (wire.ReceiptPage, error) {
	var out wire.ReceiptPage
	out.Receipts = []*holon.Receipt{}
	// A receipt numbered above another may have been created up to skew
	// before it: the search looks past the window's end by that much,
	// and the scan stops that far before its start.
	skew := e.ReceiptOrderSkew()
	if !f.until.IsZero() {
		cursor, none := receiptsBefore(e, f.until.Add(skew))
		if none {
			return out, nil // no receipt is that old
		}
		if c, _ := holon.ReceiptSeq(cursor); cursor != "" && (before == "" || c < mustSeq(before)) {
			before = cursor
		}
	}
	for out.Scanned < maxFilterScan {
		page, err := fetch(before, min(500, maxFilterScan-out.Scanned))
		if err != nil {
			return out, err
		}
		for _, r := range page.Receipts {
			out.Scanned++
			if !f.since.IsZero() && r.Created.Before(f.since.Add(-skew)) {
				return out, nil // older than the window: done
			}
			if f.keep(r) {
				out.Receipts = append(out.Receipts, r)
				if len(out.Receipts) == limit {
					out.Next = r.ID
					return out, nil
				}
			}
			before = r.ID
		}
		if page.Next == "" {
			return out, nil
		}
	}
	out.Next = before
	return out, nil
}

// receiptsBefore is a cursor ("before" of a page) past every receipt
// created at or after t, found by binary search on the receipt numbers
// (O(log n) reads, never a scan); none when no receipt is older than t. It
// relies on receipts being numbered in the order their calls start; when
// the search cannot read (a gap in the numbers), it gives no cursor and
// the filter reads from the newest.
func receiptsBefore(e *gateway.Engine, t time.Time) (cursor string, none bool) {
	_ = e.Store().View(func(tx holon.Tx) error {
		n := tx.Counter("receipts") // r1..rN
		lo, hi, first := uint64(1), n, n+1
		for lo <= hi {
			mid := lo + (hi-lo)/2
			r, err := tx.Receipt("r" + strconv.FormatUint(mid, 10))
			if err != nil {
				first = 0
				return err
			}
			if r.Created.Before(t) {
				lo = mid + 1
			} else {
				first, hi = mid, mid-1
			}
		}
		switch {
		case first == 0:
		case first == 1:
			none = true
		default:
			cursor = "r" + strconv.FormatUint(first, 10)
		}
		return nil
	})
	return cursor, none
}

func mustSeq(id string) uint64 {
	n, _ := holon.ReceiptSeq(id)
	return n
}
