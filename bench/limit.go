package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"holon.dev/holon/journal"
	"holon.dev/holon/kv/limit"
)

// targetLimitRatio is the share of the yardstick's throughput the gateway
// must reach.
const targetLimitRatio = 0.7

// limitRow runs the yardstick: the smallest durable server doing a settled
// call's durable work (kv/limit behind net/http: JSON in, the same echo
// agent in-process, one grouped bbolt commit per batch of receipt, journal
// entry, balances, budget and idempotency key, JSON out), under the same
// load as row 1, and prints row 1 as a share of it.
func (b *bench) limitRow(ctx context.Context) ([]*Result, error) {
	o := b.o
	res := &Result{
		Name:   fmt.Sprintf("[1a] row 1 against the smallest durable server doing the same durable work (net/http, JSON, one grouped bbolt commit per batch), %d clients", o.Clients),
		Target: fmt.Sprintf("row 1 ≥ %.1f × its calls/s", targetLimitRatio),
	}
	y, err := openYardstick(filepath.Join(o.Dir, "limit.db"))
	if err != nil {
		return nil, err
	}
	defer y.close()
	dc := newDevCaller(y.url, o.Clients)
	lr, err := runLoad(ctx, o.Clients, warmUp(o), o.Duration, dc.call)
	if err != nil {
		return nil, fmt.Errorf("yardstick: %w", err)
	}
	t, err := y.store.Check()
	if err != nil {
		return nil, err
	}
	price := journal.MustParseAmount(callPrice)
	n := int(dc.answered())
	if t.Sum != 0 || t.Receipts != n || t.Entries != n || t.Keys != n || t.Spent != journal.Amount(n)*price {
		return nil, fmt.Errorf("yardstick: %d calls answered, but %d receipts, %d entries, %d keys, balances sum to %s, budgets spent %s",
			n, t.Receipts, t.Entries, t.Keys, t.Sum, t.Spent)
	}
	res.Measured = fmt.Sprintf("yardstick %s calls/s (p50 %s, p99 %s)", thousands(int64(lr.Rate())), ms(lr.Lat.P(0.5)), ms(lr.Lat.P(0.99)))
	res.Notes = append(res.Notes, fmt.Sprintf("money checked: %s receipts, entries and keys for %s calls answered, balances sum to zero, budgets spent %s",
		thousands(int64(t.Receipts)), thousands(int64(n)), t.Spent))
	if b.callsRate == 0 {
		res.Verdict = "skipped: the ratio needs row 1 (--rows calls,limit)"
		return []*Result{res}, nil
	}
	ratio := b.callsRate / lr.Rate()
	res.Measured += fmt.Sprintf("; row 1 %s calls/s: %.2f of it", thousands(int64(b.callsRate)), ratio)
	res.judge(ratio >= targetLimitRatio, fmt.Sprintf("both wait for one durable commit per call (row 1's, its settlement's; the reservation is applied in the same commit or an earlier one), but row 1 writes %.1f store updates per call to the yardstick's one, and more in each (holds, events, records, the hash chain, indexes): row 1's store writer note", b.callsUpdates))
	return []*Result{res}, nil
}

// yardstick is the yardstick's HTTP server.
type yardstick struct {
	store *limit.Store
	srv   *http.Server
	url   string
	// payers maps a mandate to its payer (the bench's mandates, read-only).
	payers map[string]string
	shares []journal.Share
	price  journal.Amount
	seq    atomic.Uint64
}

func openYardstick(path string) (*yardstick, error) {
	st, err := limit.Open(path, 256)
	if err != nil {
		return nil, err
	}
	price := journal.MustParseAmount(callPrice)
	shares, err := journal.Split(price, "bench", nil)
	if err != nil {
		st.Close()
		return nil, err
	}
	y := &yardstick{store: st, payers: map[string]string{}, shares: shares, price: price}
	for i := range benchPayers {
		payer := fmt.Sprintf("p%02d", i)
		if err := st.Fund(payer, "external:demo-credit", journal.MustParseAmount("1000000.00"), mandateID(i), journal.MustParseAmount("1000000.00")); err != nil {
			st.Close()
			return nil, err
		}
		y.payers[mandateID(i)] = payer
	}
	ln, url, err := listen()
	if err != nil {
		st.Close()
		return nil, err
	}
	y.url = url
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v0/calls", y.call)
	y.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = y.srv.Serve(ln) }()
	return y, nil
}

type yardstickCall struct {
	Mandate string          `json:"mandate"`
	Agent   string          `json:"agent"`
	Input   json.RawMessage `json:"input"`
}

type yardstickAnswer struct {
	Receipt string          `json:"receipt"`
	Status  string          `json:"status"`
	Billed  bool            `json:"billed"`
	Cost    string          `json:"cost"`
	Output  json.RawMessage `json:"output"`
}

// call is POST /v0/calls: decode, find the payer, run the echo agent,
// settle durably, answer.
func (y *yardstick) call(w http.ResponseWriter, r *http.Request) {
	var in yardstickCall
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	payer, ok := y.payers[in.Mandate]
	if !ok || in.Agent != agentEcho {
		http.Error(w, "no such mandate or agent", http.StatusNotFound)
		return
	}
	out := in.Input // the agent: echo, in-process
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		key = "call:" + strconv.FormatUint(y.seq.Add(1), 10)
	}
	id, err := y.store.Settle(r.Context(), &limit.Settlement{Key: key, Mandate: in.Mandate, Payer: payer, Agent: agentEcho + "@1.0.0", Price: y.price, Shares: y.shares})
	switch {
	case errors.Is(err, limit.ErrDuplicate):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case errors.Is(err, limit.ErrOverBudget), errors.Is(err, limit.ErrNoFunds):
		http.Error(w, err.Error(), http.StatusPaymentRequired)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(yardstickAnswer{Receipt: "r" + strconv.FormatUint(id, 10), Status: "succeeded", Billed: true, Cost: y.price.String(), Output: out})
}

func (y *yardstick) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := y.srv.Shutdown(ctx)
	return errors.Join(err, y.store.Close())
}
