package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

func init() {
	add(behaviour{"Alerts/RecordedOnceDeliveredOnce", testAlerts})
}

// Ensure that the budget alerts' records behave as the engine and the
// delivery worker need: an alert is written once (a second write of its
// id is refused, the first kept), a mandate's alerts read newest first
// and not those of a mandate whose id only starts like its own, a
// webhook is replaced in place, and a delivery moves from pending to done
// (delete and put in one transaction) and survives a reopen there.
func testAlerts(t *testing.T, e *env) {
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	alert := func(mandate, window, threshold string, min int) *holon.Alert {
		a := &holon.Alert{ID: holon.AlertID(mandate, holon.AlertTotal, threshold), Mandate: mandate, Account: "alice",
			Budget: holon.AlertTotal, Threshold: threshold, Limit: journal.MustParseAmount("1.00"),
			Spent: journal.MustParseAmount("0.80"), Currency: "EUR", Receipt: "r1", Created: at.Add(time.Duration(min) * time.Minute)}
		if window != "" {
			a.ID, a.Budget, a.Window = holon.AlertID(mandate, window, threshold), holon.AlertWindow, window
		}
		return a
	}
	first := alert("alice/a", "day:2026-12-03", "50%", 0)
	e.update(func(tx holon.Tx) error {
		for _, a := range []*holon.Alert{first, alert("alice/a", "", "80%", 2), alert("alice/a.b", "", "80%", 1)} {
			if err := tx.Put(holon.BucketAlerts, a.ID, a); err != nil {
				return err
			}
		}
		if err := tx.Put(holon.BucketWebhooks, "alice", &holon.Webhook{Account: "alice", URL: "https://a.example/1", Created: at}); err != nil {
			return err
		}
		return tx.Put(holon.BucketAlertOutbox, holon.OutboxKey(holon.DeliveryPending, first.ID),
			&holon.Delivery{Alert: first.ID, Account: "alice", URL: "https://a.example/1", Status: holon.DeliveryPending, Next: at, Created: at})
	})
	again := *first
	again.Receipt = "r2"
	if err := e.s.Update(bg, func(tx holon.Tx) error { return tx.Put(holon.BucketAlerts, again.ID, &again) }); err == nil {
		t.Error("a second alert with the same id was written")
	}
	if err := e.s.Update(bg, func(tx holon.Tx) error { return tx.Delete(holon.BucketAlerts, first.ID) }); err == nil {
		t.Error("an alert was deleted")
	}
	e.update(func(tx holon.Tx) error {
		if err := tx.Put(holon.BucketWebhooks, "alice", &holon.Webhook{Account: "alice", URL: "https://a.example/2", Created: at}); err != nil {
			return err
		}
		d, ok, err := holon.DeliveryOf(tx, first.ID)
		if err != nil || !ok || d.Status != holon.DeliveryPending {
			t.Errorf("the pending delivery reads %+v, %v, %v", d, ok, err)
			return err
		}
		if err := tx.Delete(holon.BucketAlertOutbox, holon.OutboxKey(holon.DeliveryPending, first.ID)); err != nil {
			return err
		}
		done := at.Add(time.Second)
		d.Status, d.Attempts, d.Done = holon.DeliveryDelivered, 1, &done
		return tx.Put(holon.BucketAlertOutbox, holon.OutboxKey(holon.DeliveryDelivered, first.ID), d)
	})
	e.reopen()
	e.view(func(tx holon.Tx) error {
		as, err := holon.AlertsOf(tx, "alice/a")
		if err != nil {
			return err
		}
		if len(as) != 2 || as[0].ID != "alice/a/total/80%" || as[1].ID != first.ID || as[1].Receipt != "r1" {
			t.Errorf("alerts of alice/a: %+v", as)
		}
		var hook holon.Webhook
		if err := tx.Get(holon.BucketWebhooks, "alice", &hook); err != nil || hook.URL != "https://a.example/2" {
			t.Errorf("webhook %+v, %v", hook, err)
		}
		d, ok, err := holon.DeliveryOf(tx, first.ID)
		if err != nil || !ok || d.Status != holon.DeliveryDelivered || d.Done == nil || d.Attempts != 1 {
			t.Errorf("the delivery reads %+v, %v, %v", d, ok, err)
		}
		n := 0
		err = tx.ForEach(holon.BucketAlertOutbox, "pending/", func(string, json.RawMessage) (bool, error) { n++; return true, nil })
		if n != 0 {
			t.Errorf("%d deliveries still pending", n)
		}
		return err
	})
}
