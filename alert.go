package holon

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"holon.dev/holon/journal"
)

// Budget alerts: a mandate may name thresholds of its budget
// (budget.alerts, percentages of budget.per_window and of budget.total).
// The settlement that makes a budget's spent reach a threshold records an
// Alert in its own transaction; its id names the mandate, the budget (a
// window's key, or "total") and the threshold, so it is recorded once per
// threshold per window, and once for the lifetime total, whatever runs
// twice. When the mandate's issuer has a webhook, the same transaction
// queues a delivery (BucketAlertOutbox), which a worker sends.
const (
	// BucketAlerts holds the alerts, append-only: alert id → Alert.
	BucketAlerts = "alerts"
	// BucketWebhooks holds each account's webhook: handle → Webhook.
	BucketWebhooks = "webhooks"
	// BucketAlertOutbox holds the deliveries of alerts to webhooks:
	// "pending/<alert id>" until delivered (or given up), then
	// "done/<alert id>", each → Delivery.
	BucketAlertOutbox = "alert_outbox"
)

// The budgets an alert is about.
const (
	AlertWindow = "window" // a window's budget.per_window
	AlertTotal  = "total"  // the lifetime budget.total
)

// Alert is a budget threshold reached: once per threshold per window,
// once per threshold for the lifetime total.
type Alert struct {
	// ID is "<mandate>/<window key or total>/<threshold>", such as
	// "alice/ops/day:2026-12-03/80%": the same crossing has the same id.
	ID      string `json:"id"`
	Mandate string `json:"mandate"`
	// Account is the mandate's issuer: who is told (its webhook).
	Account string `json:"account"`
	// Budget is window or total; Window the window's key (window only).
	Budget string `json:"budget"`
	Window string `json:"window,omitempty"`
	// Threshold is the percentage reached ("80%"); Limit the budget it is
	// a percentage of (per_window or total); Spent what the budget had
	// spent once the settlement that reached it committed.
	Threshold string         `json:"threshold"`
	Limit     journal.Amount `json:"limit"`
	Spent     journal.Amount `json:"spent"`
	Currency  string         `json:"currency"`
	// Receipt is the call whose settlement reached it.
	Receipt string    `json:"receipt"`
	Created time.Time `json:"created"`
}

// AlertID is the id of the alert of a mandate's budget (a window's key,
// or AlertTotal) at a threshold.
func AlertID(mandate, budget, threshold string) string {
	return mandate + "/" + budget + "/" + threshold
}

// Webhook is where an account's alerts are delivered. Secret signs each
// delivery (HMAC-SHA256); it is kept sealed when the gateway has a
// secret of its own to seal it with (Sealed), and never shown again
// after it was made.
type Webhook struct {
	Account string    `json:"account"`
	URL     string    `json:"url"`
	Secret  string    `json:"secret,omitempty"`
	Sealed  []byte    `json:"sealed,omitempty"`
	Nonce   []byte    `json:"nonce,omitempty"`
	Created time.Time `json:"created"`
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed" // given up once the retry time passed
)

// Delivery is an alert on its way to a webhook (the outbox).
type Delivery struct {
	Alert   string `json:"alert"`
	Account string `json:"account"`
	URL     string `json:"url"`
	Status  string `json:"status"`
	// Attempts counts the sends; Next is when the next one is due
	// (pending); LastError is why the last one failed.
	Attempts  int        `json:"attempts"`
	Next      time.Time  `json:"next"`
	LastError string     `json:"last_error,omitempty"`
	Created   time.Time  `json:"created"`
	Done      *time.Time `json:"done,omitempty"`
}

// OutboxKey is the key of an alert's delivery in BucketAlertOutbox.
func OutboxKey(status, alert string) string {
	if status == DeliveryPending {
		return "pending/" + alert
	}
	return "done/" + alert
}

// AlertsOf reads a mandate's alerts, newest first.
func AlertsOf(tx DocsTx, mandate string) ([]*Alert, error) {
	var out []*Alert
	err := tx.ForEach(BucketAlerts, mandate+"/", func(key string, raw json.RawMessage) (bool, error) {
		a := new(Alert)
		if err := json.Unmarshal(raw, a); err != nil {
			return false, fmt.Errorf("alert %s: %w", key, err)
		}
		if a.Mandate == mandate { // not a mandate whose id extends this one's
			out = append(out, a)
		}
		return true, nil
	})
	SortAlerts(out)
	return out, err
}

// SortAlerts orders alerts newest first (by id for the same instant).
func SortAlerts(as []*Alert) {
	sort.SliceStable(as, func(i, j int) bool {
		if !as[i].Created.Equal(as[j].Created) {
			return as[i].Created.After(as[j].Created)
		}
		return as[i].ID > as[j].ID
	})
}

// DeliveryOf reads an alert's delivery (false when none was queued).
func DeliveryOf(tx DocsTx, alert string) (*Delivery, bool, error) {
	for _, st := range []string{DeliveryPending, DeliveryDelivered} {
		d := new(Delivery)
		err := tx.Get(BucketAlertOutbox, OutboxKey(st, alert), d)
		if err == nil {
			return d, true, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, false, err
		}
	}
	return nil, false, nil
}
