package webui

import (
	"errors"
	"net/http"

	"holon.dev/holon"
	"holon.dev/holon/appliance/wire"
)

// The budget alerts' pages: a mandate's alerts are on its page (its
// thresholds and each alert with its delivery); the account's webhook
// has a page of its own, whose form sets it and shows its signing secret
// once.

// routeAlerts registers the webhook's page actions.
func (c *Console) routeAlerts() {
	c.mux.Handle("GET "+Prefix+"/webhook", c.page(c.webhookView))
	c.mux.Handle("POST "+Prefix+"/webhook", c.page(c.webhookSet))
	c.mux.Handle("POST "+Prefix+"/webhook/delete", c.page(c.webhookDelete))
}

// webhookPage is the webhook's page.
type webhookPage struct {
	Webhook *wire.WebhookView
	// Secret is the secret of a webhook just set: shown once.
	Secret string
	// URL is the form's value; Error the gateway's refusal of it.
	URL, Error string
}

// mandateAlerts reads a mandate's latest alerts for its page.
func (c *Console) mandateAlerts(r *http.Request, ns, name string) ([]wire.AlertView, error) {
	var as wire.Alerts
	err := c.b.Do(r, "GET", apiPath("/v0/mandates", ns, name, "alerts")+"?limit=20", nil, &as)
	return as.Alerts, err
}

func (c *Console) webhookView(w http.ResponseWriter, r *http.Request, v Viewer) {
	c.showWebhook(w, r, v, webhookPage{}, http.StatusOK)
}

func (c *Console) showWebhook(w http.ResponseWriter, r *http.Request, v Viewer, p webhookPage, status int) {
	if v.Kind != ViewerHuman {
		c.render(w, r, v, http.StatusOK, "error", errorPage{Title: "Webhooks belong to accounts",
			Message: "A dev gateway has no accounts: set a webhook with PUT /v0/me/webhook?account=<handle>."})
		return
	}
	var hook wire.WebhookView
	err := c.b.Do(r, "GET", "/v0/me/webhook", nil, &hook)
	var ae *APIError
	switch {
	case err == nil:
		p.Webhook = &hook
		if p.URL == "" {
			p.URL = hook.URL
		}
	case errors.As(err, &ae) && ae.Err.Code == holon.CodeNotFound:
	default:
		c.fail(w, r, v, err)
		return
	}
	c.render(w, r, v, status, "webhook", p)
}

func (c *Console) webhookSet(w http.ResponseWriter, r *http.Request, v Viewer) {
	url := r.PostFormValue("url")
	var hook wire.WebhookView
	err := c.b.Do(r, "PUT", "/v0/me/webhook", map[string]string{"url": url}, &hook)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status < 500 {
		c.showWebhook(w, r, v, webhookPage{URL: url, Error: ae.Err.Msg}, ae.Status)
		return
	}
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.showWebhook(w, r, v, webhookPage{Secret: hook.Secret}, http.StatusCreated)
}

func (c *Console) webhookDelete(w http.ResponseWriter, r *http.Request, v Viewer) {
	if err := c.b.Do(r, "DELETE", "/v0/me/webhook", nil, nil); err != nil {
		c.fail(w, r, v, err)
		return
	}
	http.Redirect(w, r, Prefix+"/webhook", http.StatusSeeOther)
}
