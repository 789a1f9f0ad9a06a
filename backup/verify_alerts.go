package backup

import (
	"encoding/json"
	"fmt"
	"strings"

	"holon.dev/holon"
)

// alerts checks the budget alerts, as part of the budgets: each alert is
// keyed by its id, which names its mandate, its budget (a window's key,
// or total) and its threshold, so that none is recorded twice; its
// mandate exists and its receipt is a billed one; each delivery in the
// outbox is of an alert, pending or done as its status says, never both;
// and each webhook is its account's, with a secret.
func (v *verifier) alerts() error {
	c := v.c[CheckBudgets]
	alerts := map[string]bool{}
	err := v.tx.ForEach(holon.BucketAlerts, "", func(key string, raw json.RawMessage) (bool, error) {
		if err := v.tick(); err != nil {
			return false, err
		}
		var a holon.Alert
		if err := json.Unmarshal(raw, &a); err != nil {
			c.fail("alert %s does not decode: %v", key, err)
			return true, nil
		}
		alerts[key] = true
		budget := a.Window
		switch {
		case a.Budget == holon.AlertTotal && a.Window == "":
			budget = holon.AlertTotal
		case a.Budget != holon.AlertWindow || a.Window == "":
			c.fail("alert %s: budget %q with window %q (want total, or window with its key)", key, a.Budget, a.Window)
		}
		if want := holon.AlertID(a.Mandate, budget, a.Threshold); key != want || a.ID != key {
			c.fail("alert %s has id %s, want %s (its mandate, budget and threshold)", key, a.ID, want)
		}
		if !strings.HasSuffix(a.Threshold, "%") || a.Limit <= 0 || a.Spent <= 0 {
			c.fail("alert %s: threshold %q of %s at spent %s", key, a.Threshold, a.Limit, a.Spent)
		}
		if _, err := v.tx.Mandate(a.Mandate); err != nil {
			c.fail("alert %s: mandate %s: %v", key, a.Mandate, err)
		}
		if r, err := v.tx.Receipt(a.Receipt); err != nil || !r.Billed {
			c.fail("alert %s was reached by %s, which is not a billed receipt", key, a.Receipt)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	deliveries := 0
	done := map[string]bool{}
	err = v.tx.ForEach(holon.BucketAlertOutbox, "", func(key string, raw json.RawMessage) (bool, error) {
		if err := v.tick(); err != nil {
			return false, err
		}
		deliveries++
		var d holon.Delivery
		if err := json.Unmarshal(raw, &d); err != nil {
			c.fail("delivery %s does not decode: %v", key, err)
			return true, nil
		}
		state, id, _ := strings.Cut(key, "/")
		switch {
		case id != d.Alert:
			c.fail("delivery %s is of alert %s", key, d.Alert)
		case !alerts[id]:
			c.fail("delivery %s is of no alert", key)
		case state == "pending" && d.Status != holon.DeliveryPending,
			state == "done" && d.Status != holon.DeliveryDelivered && d.Status != holon.DeliveryFailed,
			state != "pending" && state != "done":
			c.fail("delivery %s has status %q", key, d.Status)
		case done[id]:
			c.fail("alert %s is both pending and done", id)
		}
		done[id] = true
		return true, nil
	})
	if err != nil {
		return err
	}
	err = v.tx.ForEach(holon.BucketWebhooks, "", func(key string, raw json.RawMessage) (bool, error) {
		var h holon.Webhook
		if err := json.Unmarshal(raw, &h); err != nil || h.Account != key || h.URL == "" || (h.Secret == "" && len(h.Sealed) == 0) {
			c.fail("webhook %s: account %q, url %q, with no secret or not well formed (%v)", key, h.Account, h.URL, err)
		}
		return true, nil
	})
	c.Covered += fmt.Sprintf("; %d alerts, each once and of a billed receipt; %d webhook deliveries", len(alerts), deliveries)
	return err
}
