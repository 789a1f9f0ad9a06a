package wire

import (
	"time"

	"holon.dev/holon"
)

// AlertView is a budget alert as GET /v0/alerts lists it: the alert, and
// what became of its delivery to the account's webhook (none when the
// account had no webhook when it was recorded).
type AlertView struct {
	*holon.Alert
	Delivery *DeliveryView `json:"delivery"`
}

// DeliveryView is an alert's delivery: pending (Next is the next
// attempt), delivered or failed (given up once the retry time passed).
type DeliveryView struct {
	Status    string     `json:"status"`
	Attempts  int        `json:"attempts"`
	Next      *time.Time `json:"next,omitempty"`
	LastError string     `json:"last_error,omitempty"`
	Done      *time.Time `json:"done,omitempty"`
}

// Alerts is GET /v0/alerts and GET /v0/mandates/{id}/alerts: newest first.
type Alerts struct {
	Alerts []AlertView `json:"alerts"`
}

// WebhookView is an account's webhook (GET and PUT /v0/webhook): its
// secret only in the answer of the PUT that made it.
type WebhookView struct {
	Account string    `json:"account"`
	URL     string    `json:"url"`
	Created time.Time `json:"created"`
	// Secret signs the deliveries: shown once, when the webhook is set.
	Secret string `json:"secret,omitempty"`
}
