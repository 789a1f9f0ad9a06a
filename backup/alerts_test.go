package backup_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv"
)

// alertsFixture adds to the fixture what budget alerts leave behind: the
// alert the first paid call (r1, 0.08 under alice/sandbox) reached, alice's
// webhook, and the alert's delivery, done.
func alertsFixture(tb testing.TB, s *kv.Store) {
	tb.Helper()
	at := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	update(tb, s, func(tx *kv.Tx) error {
		a := &holon.Alert{ID: holon.AlertID("alice/sandbox", holon.AlertTotal, "50%"), Mandate: "alice/sandbox", Account: "alice",
			Budget: holon.AlertTotal, Threshold: "50%", Limit: amt("0.10"), Spent: amt("0.08"), Currency: "EUR", Receipt: "r1", Created: at}
		if err := tx.Put(holon.BucketAlerts, a.ID, a); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketWebhooks, "alice", &holon.Webhook{Account: "alice", URL: "https://hooks.example.com/holon",
			Secret: "whsec_fixturefixturefixturefixturefixturefixtur", Created: at}); err != nil {
			return err
		}
		done := at.Add(time.Second)
		return tx.Put(holon.BucketAlertOutbox, holon.OutboxKey(holon.DeliveryDelivered, a.ID), &holon.Delivery{Alert: a.ID, Account: "alice",
			URL: "https://hooks.example.com/holon", Status: holon.DeliveryDelivered, Attempts: 1, Next: at, Created: at, Done: &done})
	})
}

// beforeAlertsPath is the golden file as written before budget alerts: no
// alerts, webhooks or alert_outbox table.
const beforeAlertsPath = "testdata/fixture-before-alerts.holon-backup.jsonl"

// Ensure that a backup carries the alerts, the webhooks and the
// deliveries (the golden file holds them), restores them and loads them
// into PostgreSQL, whose schema refuses a second alert of the same
// threshold; that holon verify catches an alert or a delivery edited by
// hand; and that a backup taken before alerts existed still restores,
// verifies and loads.
func TestBackup_Alerts(t *testing.T) {
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{`{"t":"alerts","k":"alice/sandbox/total/50%"`, `{"t":"webhooks","k":"alice"`, `{"t":"alert_outbox","k":"done/alice/sandbox/total/50%"`} {
		if !bytes.Contains(want, []byte(row)) {
			t.Fatalf("the golden backup lacks %s", row)
		}
	}
	srv := pgtest.Start(t)
	ls := lines(want)
	// The same alert (mandate, budget, threshold) under a second id: the
	// schema's one-alert rule.
	var twice []string
	for _, l := range ls {
		twice = append(twice, l)
		if strings.HasPrefix(l, `{"t":"alerts",`) {
			twice = append(twice, strings.ReplaceAll(l, `alice/sandbox/total/50%"`, `alice/sandbox/total/50%~"`))
		}
	}
	if _, err := backup.LoadPostgres(context.Background(), bytes.NewReader(reseal(t, twice)), srv.CreateDB(t, "alerts_twice"), nil); err == nil ||
		!strings.Contains(err.Error(), "alerts_once") {
		t.Errorf("loading an alert twice: %v", err)
	}
	for _, tt := range []struct{ name, msg string }{
		{"an alert whose id is not its key", "has id alice/sandbox/total/80%, want"},
		{"an alert of an unbilled receipt", "reached by r2, which is not a billed receipt"},
		{"a delivery of no alert", "delivery done/alice/x/total/1% is of no alert"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var edited []string
			switch tt.name {
			case "an alert whose id is not its key":
				edited = editRow(t, ls, holon.BucketAlerts, `"k":"alice/sandbox/total/50%"`, func(v map[string]any) { v["threshold"] = "80%"; v["id"] = "alice/sandbox/total/80%" })
			case "an alert of an unbilled receipt":
				edited = editRow(t, ls, holon.BucketAlerts, `"k":"alice/sandbox/total/50%"`, func(v map[string]any) { v["receipt"] = "r2" })
			default:
				edited = editRow(t, ls, holon.BucketAlertOutbox, `"k":"done/alice/sandbox/total/50%"`, func(v map[string]any) { v["alert"] = "alice/x/total/1%" })
				for i, l := range edited {
					edited[i] = strings.Replace(l, `"k":"done/alice/sandbox/total/50%"`, `"k":"done/alice/x/total/1%"`, 1)
				}
			}
			rep, _, err := backup.VerifyFile(bytes.NewReader(reseal(t, edited)), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			rep.WriteTo(&out)
			if c := rep.Check(backup.CheckBudgets); c.OK() || !strings.Contains(strings.Join(c.Problems, "\n"), tt.msg) {
				t.Errorf("check budgets does not say %q:\n%s", tt.msg, out.String())
			}
		})
	}

	old, err := os.ReadFile(beforeAlertsPath)
	if err != nil {
		t.Fatal(err)
	}
	restoreVerified(t, old)
	if _, err := backup.LoadPostgres(context.Background(), bytes.NewReader(old), srv.CreateDB(t, "before_alerts"), nil); err != nil {
		t.Fatal(err)
	}
}
