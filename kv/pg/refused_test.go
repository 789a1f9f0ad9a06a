package pg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// refusedWrites are updates that write a value PostgreSQL refuses only when
// the write reaches it (the store queues it and sends it with a later
// statement or the group's COMMIT), each after moving money as a
// settlement does, with a word the update's error must hold.
var refusedWrites = []struct {
	name string
	fn   func(tx holon.Tx) error
	want string
}{
	{"receipt error with a NUL byte", putReceipt(func(r *holon.Receipt) { e := "agent said \x00"; r.Error = &e }), "0x00"},
	{"receipt agent not UTF-8", putReceipt(func(r *holon.Receipt) { a := "ag\xff"; r.Agent = &a }), "0xff"},
	{"receipt split to an account with a NUL byte", putReceipt(func(r *holon.Receipt) {
		r.Splits = []journal.Share{{To: "x\x00", Amount: 1}}
	}), "Unicode escape"},
	{"event error with a NUL byte", func(tx holon.Tx) error {
		return tx.AppendEvent(&holon.Event{Receipt: "r1", Agent: "ag", Status: "failed", Error: "bad \x00", Currency: "USD", Time: time.Now()}, false)
	}, "0x00"},
	{"entry key with a NUL byte", func(tx holon.Tx) error {
		_, err := tx.AppendEntry(entry("key\x00", "bob", 5))
		return err
	}, "0x00"},
	{"rollup value with a NUL byte", func(tx holon.Tx) error {
		return tx.AddRollup(holon.RollupKey{Kind: 'm', Owner: "m", Dim: 'a', Day: 1, Value: "v\x00"}, "USD", holon.Tally{Calls: 1, Amount: 10})
	}, "0x00"},
	{"hold payer with a NUL byte", func(tx holon.Tx) error {
		return tx.PutHold(&holon.Hold{Receipt: "r999", Payer: "p\x00", Amount: 1, Mandate: "m", Started: time.Now()})
	}, "0x00"},
	{"mandate issuer escaped NUL", func(tx holon.Tx) error {
		return tx.PutMandate("m-bad", holon.Doc{Doc: json.RawMessage(`{"issuer":"a\u0000"}`), Created: time.Now()})
	}, "Unicode escape"},
	{"refund of a receipt never billed (checked at COMMIT)", func(tx holon.Tx) error {
		return tx.Put(holon.BucketRefunds, "rf1", map[string]any{"receipt": "r424242", "amount": "1"})
	}, "r424242"},
}

// putReceipt puts a new receipt, changed by change.
func putReceipt(change func(*holon.Receipt)) func(holon.Tx) error {
	return func(tx holon.Tx) error {
		id, err := tx.NewReceiptID()
		if err != nil {
			return err
		}
		r := &holon.Receipt{ID: id, Mandate: "m", Caller: "c", Status: "failed", Currency: "USD", Payer: "ann", Created: time.Now()}
		change(r)
		return tx.PutReceipt(r)
	}
}

// Ensure that an update of a group that writes a value PostgreSQL refuses
// only once the write reaches it (text with a NUL byte or not UTF-8, an
// escaped NUL in jsonb or in a generated column, a deferred check at
// COMMIT) fails alone, with an error that says what was refused: nothing
// of it is written (not the money it moved first), the updates grouped
// with it commit and read back, the journal still sums to zero, and the
// store goes on serving.
func TestStore_RefusedValueFailsItsUpdateAlone(t *testing.T) {
	stores, _ := openOn(t, "refusedvalue", 1)
	s := stores[0]
	bg := context.Background()
	moves := 0
	for i, c := range refusedWrites {
		t.Run(c.name, func(t *testing.T) {
			before, after, bad := fmt.Sprintf("before%d", i), fmt.Sprintf("after%d", i), fmt.Sprintf("bad%d", i)
			errs := grouped(t, s,
				func(tx holon.Tx) error { return moveAnn(tx, before) },
				func(tx holon.Tx) error {
					if err := moveAnn(tx, bad); err != nil {
						return err
					}
					return c.fn(tx)
				},
				func(tx holon.Tx) error { return moveAnn(tx, after) })
			if errs[1] == nil || !strings.Contains(errs[1].Error(), c.want) {
				t.Errorf("the update writing it: %v, want an error naming %q", errs[1], c.want)
			}
			if errors.Is(errs[1], pg.ErrUnavailable) || errors.Is(errs[1], holon.ErrBroken) {
				t.Errorf("the update writing it: %v, want its own error", errs[1])
			}
			if errs[0] != nil || errs[2] != nil {
				t.Errorf("the updates beside it: %v, %v; want both committed", errs[0], errs[2])
			}
			if errs[0] == nil {
				moves++
			}
			if errs[2] == nil {
				moves++
			}
			err := s.View(func(tx holon.Tx) error {
				if tx.HasEntry(bad) {
					return fmt.Errorf("the failed update's entry %s was journaled", bad)
				}
				for j, key := range []string{before, after} {
					if errs[2*j] == nil && !tx.HasEntry(key) {
						return fmt.Errorf("the committed update's entry %s is not journaled", key)
					}
				}
				ann, bud, err := annAndM(tx)
				if err != nil {
					return err
				}
				m := int64(moves)
				if ann.Balance != journal.Amount(10*m) || ann.Held != journal.Amount(m) || bud.Spent != journal.Amount(10*m) ||
					tx.Counter("moves") != uint64(m) {
					return fmt.Errorf("ann %+v, budget %+v, %d moves; want %d moves", ann, bud, tx.Counter("moves"), m)
				}
				return tx.(*pg.Tx).VerifyJournal()
			})
			if err != nil {
				t.Error(err)
			}
			// The store goes on serving, alone and in a group.
			if err := s.Update(bg, func(tx holon.Tx) error { return moveAnn(tx, fmt.Sprintf("next%d", i)) }); err != nil {
				t.Fatalf("the next update: %v", err)
			}
			moves++
		})
	}
}

// Ensure that the checks PostgreSQL defers to the COMMIT (refunds stay
// within their receipt's cost) hold each update of a group to what the
// updates before it wrote: in one group, a billed receipt is written, a
// refund of 6 of its 10 commits, a second refund of 6 fails alone (12 in
// all), also when its check is refused in the round trip of the update
// after it (which runs again), and an update refused when its write is
// sent (a NUL byte) fails alone too, beside them.
func TestStore_CommitCheckFailsItsUpdateAlone(t *testing.T) {
	stores, _ := openOn(t, "commitcheck", 1)
	s := stores[0]
	refund := func(key string) func(holon.Tx) error {
		return func(tx holon.Tx) error {
			return tx.Put(holon.BucketRefunds, key, map[string]any{"receipt": "r77", "amount": "6"})
		}
	}
	safe := s.SafeRuns()
	errs := grouped(t, s,
		func(tx holon.Tx) error {
			return tx.PutReceipt(&holon.Receipt{ID: "r77", Mandate: "m", Caller: "c", Status: "succeeded", Currency: "USD", Payer: "ann",
				Billed: true, Cost: holon.Cost{Own: 10_000_000, Total: 10_000_000}, Created: time.Now()})
		},
		refund("rf-a"),
		func(tx holon.Tx) error {
			if err := moveAnn(tx, "nul"); err != nil {
				return err
			}
			_, err := tx.AppendEntry(entry("nul\x00", "bob", 1))
			return err
		},
		refund("rf-b"),
		func(tx holon.Tx) error {
			// A read no cache answers: the second refund's check goes
			// with it, is refused, and this update runs again.
			if _, err := tx.Receipts("", "", 1); err != nil {
				return err
			}
			return moveAnn(tx, "ok")
		})
	if errs[0] != nil || errs[1] != nil || errs[4] != nil {
		t.Errorf("the receipt, the first refund, the last move: %v, %v, %v; want all committed", errs[0], errs[1], errs[4])
	}
	if errs[2] == nil || !strings.Contains(errs[2].Error(), "0x00") {
		t.Errorf("the entry with a NUL byte: %v, want PostgreSQL's refusal", errs[2])
	}
	if errs[3] == nil || !strings.Contains(errs[3].Error(), "refunded 12") {
		t.Errorf("the second refund: %v, want refused (12 refunded of 10)", errs[3])
	}
	if n := s.SafeRuns() - safe; n != 1 {
		t.Errorf("%d safe runs, want 1", n)
	}
	err := s.View(func(tx holon.Tx) error {
		var v map[string]any
		if err := tx.Get(holon.BucketRefunds, "rf-a", &v); err != nil {
			return fmt.Errorf("the first refund: %w", err)
		}
		if err := tx.Get(holon.BucketRefunds, "rf-b", &v); !errors.Is(err, holon.ErrNotFound) {
			return fmt.Errorf("the second refund: %v, want not found", err)
		}
		if tx.HasEntry("nul") || !tx.HasEntry("ok") || tx.Counter("moves") != 1 {
			return fmt.Errorf("entries nul %v, ok %v, %d moves; want only ok's", tx.HasEntry("nul"), tx.HasEntry("ok"), tx.Counter("moves"))
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
}
