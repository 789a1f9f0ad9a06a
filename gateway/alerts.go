package gateway

import (
	"errors"
	"fmt"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Budget alerts (contract/alerts.go): the settlement whose charge makes a
// budget's spent reach one of its mandate's thresholds records the alert
// in its own transaction, and, when the issuer has a webhook, queues its
// delivery there too, so that an alert is never lost and the webhook is
// never told of one that did not happen. The alert's id names the
// mandate, the budget and the threshold: a settlement that runs again, a
// refund that lowers spent and a later call that reaches the threshold
// once more find it recorded and record nothing. A settlement that
// reaches no threshold reads the budgets it charged (mandates with
// alerts only) and writes nothing more.

// charged is a budget a settlement charged: a mandate, and the window
// of its budget that paid ("" when it does not renew).
type charged struct {
	mandate, window string
}

// alertsReached records the alerts the settlement of st reached, having
// charged charge to each budget of spent (the call's own mandate, then
// each mandate it draws on, passthrough).
func (e *Engine) alertsReached(tx holon.Tx, st *runState, spent []charged, charge journal.Amount) ([]*holon.Alert, error) {
	if charge <= 0 {
		return nil, nil
	}
	var out []*holon.Alert
	for _, c := range spent {
		m := st.mandateOf(c.mandate)
		if m == nil || len(m.Budget.Alerts) == 0 {
			continue
		}
		as, err := e.reach(tx, m, c.window, charge, st.rid)
		if err != nil {
			return nil, fmt.Errorf("alerts of %s: %w", m.ID, err)
		}
		out = append(out, as...)
	}
	return out, nil
}

// mandateOf is the mandate of a budget the run's settlement charged: its
// own, or an ancestor run's (nil when none of them runs under it).
func (s *runState) mandateOf(id string) *contract.Mandate {
	for r := s; r != nil; r = r.parent {
		if r.mandate.ID == id {
			return r.mandate
		}
	}
	return nil
}

// reach records the alerts of m whose thresholds the charge just reached:
// in window (when m's budget renews by window) and in the lifetime total.
func (e *Engine) reach(tx holon.Tx, m *contract.Mandate, window string, charge journal.Amount, receipt string) ([]*holon.Alert, error) {
	var out []*holon.Alert
	check := func(budget string, limit, spent journal.Amount) error {
		if limit <= 0 || limit == journal.MaxAmount {
			return nil
		}
		for _, t := range m.Budget.Alerts {
			at := t.Of(limit)
			if spent < at || spent-charge >= at {
				continue // not reached, or reached before this charge
			}
			key := budget
			if budget == holon.AlertWindow {
				key = window
			}
			a := &holon.Alert{ID: holon.AlertID(m.ID, key, t.String()), Mandate: m.ID, Account: m.Issuer, Budget: budget,
				Threshold: t.String(), Limit: limit, Spent: spent, Currency: m.Currency, Receipt: receipt, Created: e.now().UTC()}
			if budget == holon.AlertWindow {
				a.Window = window
			}
			recorded, err := e.recordAlert(tx, a)
			if err != nil {
				return err
			}
			if recorded {
				out = append(out, a)
			}
		}
		return nil
	}
	exact, _ := tx.(holon.ExactBudgets)
	budget := func(window string) (holon.Budget, error) {
		switch {
		case exact != nil:
			return exact.ExactBudget(m.ID, window)
		case window != "":
			return tx.WindowBudget(m.ID, window)
		}
		return tx.Budget(m.ID)
	}
	if window != "" && m.Windowed() {
		wb, err := budget(window)
		if err != nil {
			return nil, err
		}
		if err := check(holon.AlertWindow, m.PerWindow(), wb.Spent); err != nil {
			return nil, err
		}
	}
	if m.Budget.Total != nil {
		b, err := budget("")
		if err != nil {
			return nil, err
		}
		if err := check(holon.AlertTotal, *m.Budget.Total, b.Spent); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// recordAlert writes an alert unless one with its id is recorded, and
// queues its delivery to the issuer's webhook if it has one. It reports
// whether it wrote it.
func (e *Engine) recordAlert(tx holon.Tx, a *holon.Alert) (bool, error) {
	var old holon.Alert
	switch err := tx.Get(holon.BucketAlerts, a.ID, &old); {
	case err == nil:
		return false, nil
	case !errors.Is(err, holon.ErrNotFound):
		return false, err
	}
	if err := tx.Put(holon.BucketAlerts, a.ID, a); err != nil {
		return false, err
	}
	var hook holon.Webhook
	switch err := tx.Get(holon.BucketWebhooks, a.Account, &hook); {
	case errors.Is(err, holon.ErrNotFound):
		return true, nil
	case err != nil:
		return false, err
	}
	d := &holon.Delivery{Alert: a.ID, Account: a.Account, URL: hook.URL, Status: holon.DeliveryPending, Next: a.Created, Created: a.Created}
	return true, tx.Put(holon.BucketAlertOutbox, holon.OutboxKey(holon.DeliveryPending, a.ID), d)
}

// Alerts lists a stored mandate's alerts, newest first.
func (e *Engine) Alerts(mandate string) ([]*holon.Alert, error) {
	var out []*holon.Alert
	err := e.store.View(func(tx holon.Tx) error {
		if tx.MandateRevision(mandate) == nil {
			return holon.Errorf(holon.CodeNotFound, "no mandate %s", mandate)
		}
		var err error
		out, err = holon.AlertsOf(tx, mandate)
		return err
	})
	return out, err
}
