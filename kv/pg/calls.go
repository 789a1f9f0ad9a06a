package pg

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// NewReceiptID reserves the next receipt id.
func (t *Tx) NewReceiptID() (string, error) {
	n, err := t.nextSeq("receipts")
	id := "r" + strconv.FormatUint(n, 10)
	if err == nil {
		// Receipt ids come from this sequence alone, so there is no
		// receipt under it yet (PutReceipt's insert is refused if there
		// were).
		t.readAbsent(kReceipt(id))
	}
	return id, err
}

const receiptColumns = `id, parent, mandate, caller, agent, status, error, approval, (worst_case * 1000000)::bigint,
	currency, payer, sub_mandate, billed, (cost_own * 1000000)::bigint, (cost_downstream * 1000000)::bigint,
	(cost_total * 1000000)::bigint, splits::text, children, duration_ms, created`

func scanReceipt(rows pgx.Rows) (*holon.Receipt, error) {
	rc := new(holon.Receipt)
	var worst *int64
	var own, down, total int64
	var splits *string
	var created string
	if err := rows.Scan(&rc.ID, &rc.Parent, &rc.Mandate, &rc.Caller, &rc.Agent, &rc.Status, &rc.Error, &rc.Approval, &worst,
		&rc.Currency, &rc.Payer, &rc.SubMandate, &rc.Billed, &own, &down, &total, &splits, &rc.Children, &rc.DurationMS, &created); err != nil {
		return nil, err
	}
	rc.WorstCase = optAmount(worst)
	rc.Cost = holon.Cost{Own: journal.Amount(own), Downstream: journal.Amount(down), Total: journal.Amount(total)}
	if splits != nil {
		if err := json.Unmarshal([]byte(*splits), &rc.Splits); err != nil {
			return nil, fmt.Errorf("receipt %s: splits: %w", rc.ID, err)
		}
	}
	var err error
	rc.Created, err = parseTime(created)
	return rc, err
}

// PutReceipt writes a new receipt or the final state of one.
func (t *Tx) PutReceipt(r *holon.Receipt) error {
	defer t.inside()()
	seq, ok := holon.ReceiptSeq(r.ID)
	if !ok {
		return fmt.Errorf("receipt id %q is not r<number>", r.ID)
	}
	if err := t.writable(); err != nil {
		return err
	}
	var splits []byte
	if r.Splits != nil {
		var err error
		if splits, err = json.Marshal(r.Splits); err != nil {
			return err
		}
	}
	k := kReceipt(r.ID)
	c, known := t.cached(k)
	if known {
		// A row of one statement per table and round trip (rows.go):
		// new (its id was just handed out, or the database said so), a
		// plain insert, refused if the writer were wrong, and the
		// counters as the writer knows them; else a new state of it.
		row, err := receiptRow(r, int64(seq), splits)
		if err != nil {
			return err
		}
		kind := rowReceiptPut
		if c.st == absent {
			kind = rowReceiptNew
		}
		if err := t.appendRows(k, kind, nil, row); err != nil {
			return err
		}
		if c.st == absent {
			if _, err := t.AddCounter("receipts", 1); err != nil {
				return err
			}
			if _, err := t.AddCounter("receipts:"+r.Mandate, 1); err != nil {
				return err
			}
		}
	} else {
		// Counted if new, in the same statement, without waiting for an
		// answer; what the counters are now, the database knows.
		counters := []string{kCounter("receipts"), kCounter("receipts:" + r.Mandate)}
		err := t.execTouching(append(counters, k), receiptCounted, r.ID, int64(seq), r.Parent, r.Mandate, r.Caller, r.Agent, r.Status, r.Error,
			r.Approval, OptNumeric(r.WorstCase), r.Currency, r.Payer, r.SubMandate, r.Billed, Numeric(r.Cost.Own),
			Numeric(r.Cost.Downstream), Numeric(r.Cost.Total), jsonArg(splits), r.Children, r.DurationMS, ts(r.Created), int32(t.s.chain))
		if err != nil {
			return err
		}
		for _, k := range counters {
			t.forget(k)
		}
	}
	v := cloneReceipt(r)
	v.Created, _ = parseTime(ts(r.Created)) // as it reads back
	t.wrote(k, v)
	return nil
}

// receiptRow is a receipt as a row of receiptRowsInsert (rows.go).
func receiptRow(r *holon.Receipt, seq int64, splits []byte) ([]any, error) {
	var worst *int64
	if r.WorstCase != nil {
		w := int64(*r.WorstCase)
		worst = &w
	}
	var children *string
	if r.Children != nil {
		b, err := json.Marshal(r.Children)
		if err != nil {
			return nil, err
		}
		s := string(b)
		children = &s
	}
	var sp *string
	if splits != nil {
		s := string(splits)
		sp = &s
	}
	return []any{r.ID, seq, r.Parent, r.Mandate, r.Caller, r.Agent, r.Status, r.Error, r.Approval, worst,
		r.Currency, r.Payer, r.SubMandate, r.Billed, int64(r.Cost.Own), int64(r.Cost.Downstream), int64(r.Cost.Total),
		sp, children, r.DurationMS, ts(r.Created)}, nil
}

// The statements that write a receipt: as a new one or a new state of
// one, counting it when new, when the writer does not know whether it is.
const (
	receiptInsert = `INSERT INTO receipts AS r (id, seq, parent, mandate, caller, agent, status, error, approval, worst_case, currency, payer,
			sub_mandate, billed, cost_own, cost_downstream, cost_total, splits, children, duration_ms, created)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)`
	receiptUpsert     = receiptInsert + receiptOnConflict
	receiptOnConflict = `
		ON CONFLICT (id) DO UPDATE SET parent = EXCLUDED.parent, mandate = EXCLUDED.mandate, caller = EXCLUDED.caller,
			agent = EXCLUDED.agent, status = EXCLUDED.status, error = EXCLUDED.error, approval = EXCLUDED.approval,
			worst_case = EXCLUDED.worst_case, currency = EXCLUDED.currency, payer = EXCLUDED.payer, sub_mandate = EXCLUDED.sub_mandate,
			billed = EXCLUDED.billed, cost_own = EXCLUDED.cost_own, cost_downstream = EXCLUDED.cost_downstream,
			cost_total = EXCLUDED.cost_total, splits = EXCLUDED.splits, children = EXCLUDED.children,
			duration_ms = EXCLUDED.duration_ms, created = EXCLUDED.created`
	receiptCounted = `WITH r AS (` + receiptUpsert + `
		RETURNING xmax = 0 AS inserted)
		INSERT INTO counters AS c (name, part, value)
			SELECT n, $22::int, 1 FROM r, unnest(ARRAY['receipts', 'receipts:' || $4::text]) AS n WHERE r.inserted
		ON CONFLICT (name, part) DO UPDATE SET value = c.value + 1`
)

// jsonArg is a JSON value for a json column, NULL when nil.
func jsonArg(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// Receipt reads one receipt.
func (t *Tx) Receipt(id string) (*holon.Receipt, error) {
	if _, ok := holon.ReceiptSeq(id); !ok {
		return nil, holon.ErrNotFound
	}
	k := kReceipt(id)
	if c, ok := t.cached(k); ok {
		if c.st == present {
			return cloneReceipt(c.v.(*holon.Receipt)), nil
		}
		return nil, holon.ErrNotFound
	}
	var out *holon.Receipt
	err := t.all(`SELECT `+receiptColumns+` FROM receipts WHERE id = $1`, []any{id}, func(rows pgx.Rows) (err error) {
		out, err = scanReceipt(rows)
		return err
	})
	switch {
	case err == nil && out == nil:
		t.readAbsent(k)
		err = holon.ErrNotFound
	case err == nil:
		t.read(k, cloneReceipt(out))
	}
	return out, err
}

// Receipts lists receipts newest first, of one mandate or all.
func (t *Tx) Receipts(mandate, before string, limit int) (holon.ReceiptPage, error) {
	var page holon.ReceiptPage
	if limit <= 0 {
		limit = 50
	}
	start := int64(1<<63 - 1)
	if before != "" {
		n, ok := holon.ReceiptSeq(before)
		if !ok {
			return page, fmt.Errorf("cursor %q is not a receipt id", before)
		}
		start = int64(n) - 1
	}
	err := t.all(`SELECT `+receiptColumns+` FROM receipts WHERE seq <= $1 AND ($2 = '' OR mandate = $2) ORDER BY seq DESC LIMIT $3`,
		[]any{start, mandate, limit + 1}, func(rows pgx.Rows) error {
			r, err := scanReceipt(rows)
			page.Receipts = append(page.Receipts, r)
			return err
		})
	if len(page.Receipts) > limit {
		page.Receipts = page.Receipts[:limit]
		page.Next = page.Receipts[limit-1].ID
	}
	return page, err
}

// Budget reads a mandate's spending.
func (t *Tx) Budget(mandate string) (holon.Budget, error) {
	return t.budget(kBudget(mandate), budgetSelect, mandate)
}

// budgetSelect reads a mandate's budget.
const budgetSelect = `SELECT (spent * 1000000)::bigint, (reserved * 1000000)::bigint FROM budgets WHERE mandate = $1`

// budget reads a budget row through the writer's cache.
func (t *Tx) budget(k, sql string, args ...any) (holon.Budget, error) {
	if c, ok := t.cached(k); ok {
		if c.st == present {
			return c.v.(holon.Budget), nil
		}
		return holon.Budget{}, nil
	}
	var spent, reserved int64
	err := t.one(sql, args, &spent, &reserved)
	if err == holon.ErrNotFound {
		t.readAbsent(k)
		return holon.Budget{}, nil
	}
	b := holon.Budget{Spent: journal.Amount(spent), Reserved: journal.Amount(reserved)}
	if err == nil {
		t.read(k, b)
	}
	return b, err
}

// AddBudget moves a mandate's spent and reserved amounts.
func (t *Tx) AddBudget(mandate string, spent, reserved journal.Amount) error {
	defer t.inside()()
	b, err := t.Budget(mandate)
	if err != nil {
		return err
	}
	k := holon.BudgetKey{Mandate: mandate}
	t.limits.Before(k, b)
	if err := b.Add(spent, reserved); err != nil {
		return fmt.Errorf("budget of %s %w", mandate, err)
	}
	if err := t.writeRow(kBudget(mandate), rowBudgetMove, mandate, spent.Micros(), reserved.Micros(), t.budgetCap(k)); err != nil {
		return err
	}
	t.wrote(kBudget(mandate), b)
	return nil
}

// LimitBudget declares a budget's limit for the rest of the update
// (holon.BudgetLimits).
func (t *Tx) LimitBudget(mandate, window string, limit journal.Amount) {
	if !t.readOnly {
		t.limits.Limit(holon.BudgetKey{Mandate: mandate, Window: window}, limit)
	}
}

// budgetCap is the limit a budget's move carries to the database, which
// judges the budget against it at the commit (migration 19): the limit
// the update declared, nil for none.
func (t *Tx) budgetCap(k holon.BudgetKey) *int64 {
	if l, ok := t.limits.Declared(k); ok && l < journal.MaxAmount {
		c := l.Micros()
		return &c
	}
	return nil
}

// checkLimits refuses the update when it raised a budget above the limit
// it declared for it, from what the writer knows (the budgets it moved
// are known: no round trip), without the update seeing them (spec.go);
// the database checks the same from its rows (migration 19).
func (t *Tx) checkLimits() error {
	defer t.inside()()
	return t.limits.Check(func(k holon.BudgetKey) (holon.Budget, error) {
		if k.Window == "" {
			return t.Budget(k.Mandate)
		}
		return t.WindowBudget(k.Mandate, k.Window)
	})
}

// WindowBudget reads a mandate's spending in one budget window.
func (t *Tx) WindowBudget(mandate, window string) (holon.Budget, error) {
	return t.budget(kWindow(mandate, window), windowSelect, mandate, window)
}

// windowSelect reads a mandate's budget in one window.
const windowSelect = `SELECT (spent * 1000000)::bigint, (reserved * 1000000)::bigint FROM budget_windows WHERE mandate = $1 AND win = $2`

// ExactBudget reads a mandate's budget, or its spending in a window
// (window not ""), as this transaction's commit leaves it
// (holon.ExactBudgets). Writers that take turns know it: the writer's
// idea of it is the database's. A writer that overlaps reads it from the
// database, the update's own moves sent first, and locks the row until
// the commit, so that no other gateway moves it meanwhile (overlap.go:
// its idea of a budget may lack the others' moves).
func (t *Tx) ExactBudget(mandate, window string) (holon.Budget, error) {
	if !t.s.overlap || t.g == nil {
		if window == "" {
			return t.Budget(mandate)
		}
		return t.WindowBudget(mandate, window)
	}
	k, sql, args := kBudget(mandate), budgetSelect, []any{mandate}
	if window != "" {
		k, sql, args = kWindow(mandate, window), windowSelect, []any{mandate, window}
	}
	var spent, reserved int64
	err := t.one(sql+` FOR UPDATE`, args, &spent, &reserved)
	if err == holon.ErrNotFound {
		t.readAbsent(k)
		return holon.Budget{}, nil
	}
	if err != nil {
		return holon.Budget{}, err
	}
	b := holon.Budget{Spent: journal.Amount(spent), Reserved: journal.Amount(reserved)}
	t.read(k, b)
	return b, nil
}

// AddWindowBudget moves a mandate's spent and reserved in one budget window.
func (t *Tx) AddWindowBudget(mandate, window string, spent, reserved journal.Amount) error {
	defer t.inside()()
	if window == "" {
		return fmt.Errorf("budget window of %s: no window key", mandate)
	}
	b, err := t.WindowBudget(mandate, window)
	if err != nil {
		return err
	}
	k := holon.BudgetKey{Mandate: mandate, Window: window}
	t.limits.Before(k, b)
	if err := b.Add(spent, reserved); err != nil {
		return fmt.Errorf("budget of %s in %s %w", mandate, window, err)
	}
	if err := t.writeRow(kWindow(mandate, window), rowWindowMove, mandate, window, spent.Micros(), reserved.Micros(), t.budgetCap(k)); err != nil {
		return err
	}
	t.wrote(kWindow(mandate, window), b)
	return nil
}

const holdColumns = `receipt, payer, (amount * 1000000)::bigint, mandate, (reserved * 1000000)::bigint, funder, parent, children,
	(downstream * 1000000)::bigint, sub_mandate, started, budget_window`

func scanHold(rows pgx.Rows) (*holon.Hold, error) {
	h := new(holon.Hold)
	var amount, reserved, down int64
	var funder, parent, sub, window *string
	var started string
	if err := rows.Scan(&h.Receipt, &h.Payer, &amount, &h.Mandate, &reserved, &funder, &parent, &h.Children, &down, &sub, &started, &window); err != nil {
		return nil, err
	}
	h.Amount, h.Reserved, h.Downstream = journal.Amount(amount), journal.Amount(reserved), journal.Amount(down)
	h.Funder, h.Parent, h.SubMandate, h.Window = deref(funder), deref(parent), deref(sub), deref(window)
	if len(h.Children) == 0 {
		h.Children = nil
	}
	var err error
	h.Started, err = parseTime(started)
	return h, err
}

// holdOnConflict makes the insert of holds (rows.go) a put.
const holdOnConflict = `ON CONFLICT (receipt) DO UPDATE SET payer = EXCLUDED.payer, amount = EXCLUDED.amount, mandate = EXCLUDED.mandate,
			reserved = EXCLUDED.reserved, funder = EXCLUDED.funder, parent = EXCLUDED.parent, children = EXCLUDED.children,
			downstream = EXCLUDED.downstream, sub_mandate = EXCLUDED.sub_mandate, started = EXCLUDED.started, gateway = EXCLUDED.gateway,
			budget_window = EXCLUDED.budget_window`

// PutHold records a call in flight.
func (t *Tx) PutHold(h *holon.Hold) error {
	children := h.Children
	if children == nil {
		children = []string{}
	}
	// The hold is this gateway's (its lease's id): Orphaned once that
	// runs out.
	kids, err := json.Marshal(children)
	if err != nil {
		return err
	}
	var window *string
	if h.Window != "" {
		window = &h.Window
	}
	if err := t.guard(kHold(h.Receipt)); err != nil {
		return err
	}
	err = t.appendRows(kHold(h.Receipt), rowHold, nil, []any{h.Receipt, h.Payer, int64(h.Amount), h.Mandate, int64(h.Reserved),
		optText(h.Funder), optText(h.Parent), string(kids), int64(h.Downstream), optText(h.SubMandate), ts(h.Started), t.s.id, window})
	if err == nil {
		c := cloneHold(h)
		if len(c.Children) == 0 {
			c.Children = nil
		}
		c.Started, _ = parseTime(ts(h.Started)) // as it reads back
		t.wrote(kHold(h.Receipt), c)
	}
	return err
}

// Hold reads a call in flight.
func (t *Tx) Hold(receipt string) (*holon.Hold, error) {
	k := kHold(receipt)
	if c, ok := t.cached(k); ok {
		t.saw(k, c)
		if c.st == present {
			return cloneHold(c.v.(*holon.Hold)), nil
		}
		return nil, holon.ErrNotFound
	}
	var out *holon.Hold
	err := t.all(`SELECT `+holdColumns+` FROM holds WHERE receipt = $1`, []any{receipt}, func(rows pgx.Rows) (err error) {
		out, err = scanHold(rows)
		return err
	})
	switch {
	case err == nil && out == nil:
		t.readAbsent(k)
		t.saw(k, entry{st: absent})
		err = holon.ErrNotFound
	case err == nil:
		t.read(k, cloneHold(out))
		t.saw(k, entry{})
	}
	return out, err
}

// DeleteHold forgets a call in flight once it settled.
func (t *Tx) DeleteHold(receipt string) error {
	if err := t.appendRows(kHold(receipt), rowHoldGone, nil, []any{receipt}); err != nil {
		return err
	}
	t.wroteAbsent(kHold(receipt))
	return nil
}

// Holds lists the calls in flight.
func (t *Tx) Holds() ([]*holon.Hold, error) {
	var out []*holon.Hold
	err := t.all(`SELECT `+holdColumns+` FROM holds ORDER BY receipt COLLATE "C"`, nil, func(rows pgx.Rows) error {
		h, err := scanHold(rows)
		out = append(out, h)
		return err
	})
	return out, err
}

// NewApprovalID reserves the next approval id.
func (t *Tx) NewApprovalID() (string, error) {
	n, err := t.nextSeq("approvals")
	return "a" + strconv.FormatUint(n, 10), err
}

const approvalColumns = `seq, id, mandate, caller, agent, capability, input_hash, (max_cost * 1000000)::bigint, (worst_case * 1000000)::bigint,
	currency, receipt, status, created, expires, decided, run, input::text`

func scanApproval(rows pgx.Rows) (uint64, *holon.Approval, error) {
	a := new(holon.Approval)
	var seq int64
	var capability, decided, input *string
	var maxCost *int64
	var worst int64
	var created, expires string
	if err := rows.Scan(&seq, &a.ID, &a.Mandate, &a.Caller, &a.Agent, &capability, &a.InputHash, &maxCost, &worst,
		&a.Currency, &a.Receipt, &a.Status, &created, &expires, &decided, &a.Run, &input); err != nil {
		return 0, nil, err
	}
	a.Capability = deref(capability)
	a.MaxCost, a.WorstCase = optAmount(maxCost), journal.Amount(worst)
	if input != nil {
		a.Input = json.RawMessage(*input)
	}
	var err error
	if a.Created, err = parseTime(created); err != nil {
		return 0, nil, err
	}
	if a.Expires, err = parseTime(expires); err != nil {
		return 0, nil, err
	}
	a.Decided, err = parseOptTime(decided)
	return uint64(seq), a, err
}

// PutApproval writes an approval.
func (t *Tx) PutApproval(a *holon.Approval) error {
	seq, ok := holon.ApprovalSeq(a.ID)
	if !ok {
		return holon.ErrNotFound
	}
	var input any
	if len(a.Input) > 0 {
		b, err := json.Marshal(a.Input) // as the embedded store writes it
		if err != nil {
			return err
		}
		input = string(b)
	}
	if err := t.guard(kApproval(a.ID)); err != nil {
		return err
	}
	return t.execFree(`INSERT INTO approvals (id, seq, mandate, caller, agent, capability, input_hash, max_cost, worst_case, currency,
			receipt, status, created, expires, decided, run, input)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
		ON CONFLICT (id) DO UPDATE SET mandate = EXCLUDED.mandate, caller = EXCLUDED.caller, agent = EXCLUDED.agent,
			capability = EXCLUDED.capability, input_hash = EXCLUDED.input_hash, max_cost = EXCLUDED.max_cost,
			worst_case = EXCLUDED.worst_case, currency = EXCLUDED.currency, receipt = EXCLUDED.receipt, status = EXCLUDED.status,
			created = EXCLUDED.created, expires = EXCLUDED.expires, decided = EXCLUDED.decided, run = EXCLUDED.run, input = EXCLUDED.input`,
		a.ID, int64(seq), a.Mandate, a.Caller, a.Agent, optText(a.Capability), a.InputHash, OptNumeric(a.MaxCost), Numeric(a.WorstCase),
		a.Currency, a.Receipt, a.Status, ts(a.Created), ts(a.Expires), optTs(a.Decided), a.Run, input)
}

// Approval reads one approval.
func (t *Tx) Approval(id string) (*holon.Approval, error) {
	if _, ok := holon.ApprovalSeq(id); !ok {
		return nil, holon.ErrNotFound
	}
	var out *holon.Approval
	err := t.all(`SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, []any{id}, func(rows pgx.Rows) (err error) {
		_, out, err = scanApproval(rows)
		return err
	})
	switch {
	case err == nil && out == nil:
		t.saw(kApproval(id), entry{st: absent})
		err = holon.ErrNotFound
	case err == nil:
		t.saw(kApproval(id), entry{v: out.Status})
	}
	return out, err
}

// Approvals lists approvals newest first that keep accepts.
func (t *Tx) Approvals(keep func(*holon.Approval) bool, limit int) ([]*holon.Approval, error) {
	var out []*holon.Approval
	err := t.walkApprovals(nil, 1<<63-1, func(_ uint64, a *holon.Approval) bool {
		if len(out) >= limit {
			return false
		}
		if keep(a) {
			out = append(out, a)
		}
		return len(out) < limit
	})
	return out, err
}

// walkApprovals calls fn for approvals at or below seq start, newest first
// (of the given mandates, or all when nil), a page at a time, until fn
// returns false.
func (t *Tx) walkApprovals(mandates []string, start int64, fn func(seq uint64, a *holon.Approval) bool) error {
	for {
		type row struct {
			seq uint64
			a   *holon.Approval
		}
		var page []row
		err := t.all(`SELECT `+approvalColumns+` FROM approvals WHERE seq <= $1 AND ($2::text[] IS NULL OR mandate = ANY($2))
			ORDER BY seq DESC LIMIT $3`, []any{start, mandates, pageSize}, func(rows pgx.Rows) error {
			seq, a, err := scanApproval(rows)
			page = append(page, row{seq, a})
			return err
		})
		if err != nil {
			return err
		}
		for _, r := range page {
			if !fn(r.seq, r.a) {
				return nil
			}
			start = int64(r.seq) - 1
		}
		if len(page) < pageSize {
			return nil
		}
	}
}

// ApprovalsOf lists the approvals of the given mandates newest first.
func (t *Tx) ApprovalsOf(mandates []string, before string, keep func(*holon.Approval) bool, limit, scan int) (holon.ApprovalPage, error) {
	if mandates == nil {
		mandates = []string{}
	}
	return t.approvalPage(mandates, before, keep, limit, scan)
}

// ApprovalsBefore is ApprovalsOf over every mandate's approvals.
func (t *Tx) ApprovalsBefore(before string, keep func(*holon.Approval) bool, limit, scan int) (holon.ApprovalPage, error) {
	return t.approvalPage(nil, before, keep, limit, scan)
}

// approvalPage reads a page: at most limit kept, at most scan read (at
// least limit), with a Next when more approvals follow.
func (t *Tx) approvalPage(mandates []string, before string, keep func(*holon.Approval) bool, limit, scan int) (holon.ApprovalPage, error) {
	var page holon.ApprovalPage
	start := int64(1<<63 - 1)
	if before != "" {
		n, ok := holon.ApprovalSeq(before)
		if !ok {
			return page, fmt.Errorf("cursor %q is not an approval id", before)
		}
		start = int64(n) - 1
	}
	if limit <= 0 {
		limit = 50
	}
	scan = max(scan, limit)
	var read int
	var last uint64
	err := t.walkApprovals(mandates, start, func(seq uint64, a *holon.Approval) bool {
		if len(page.Approvals) == limit || read == scan {
			page.Next = "a" + strconv.FormatUint(last, 10)
			return false
		}
		read, last = read+1, seq
		if keep(a) {
			page.Approvals = append(page.Approvals, a)
		}
		return true
	})
	return page, err
}

// AppendEvent records a finished run and adds it to its agent's record.
func (t *Tx) AppendEvent(ev *holon.Event, succeeded bool) error { return t.appendEvent(ev, succeeded) }

// PostEvent is AppendEvent without the Seq, as PostEntry.
func (t *Tx) PostEvent(ev holon.Event, succeeded bool) error {
	defer t.inside()()
	return t.appendEvent(&ev, succeeded)
}

func (t *Tx) appendEvent(ev *holon.Event, succeeded bool) error {
	seq, err := t.nextSeq("call_events")
	if err != nil {
		return err
	}
	ev.Seq = seq
	if err := t.appendRows("", rowEvent, nil, []any{int64(seq), ev.Receipt, ev.Agent, ev.Status, optText(ev.Error),
		ev.DurationMS, ev.Billed.Micros(), ev.Currency, ev.Delegated, ts(ev.Time)}); err != nil {
		return err
	}
	ok := int64(0)
	if succeeded {
		ok = 1
	}
	// The record is moved, a hot row (rows.go); the writer reads it first
	// when it does not know it, to know its new value.
	r, err := t.Record(ev.Agent)
	if err != nil {
		return err
	}
	r.Runs++
	r.Succeeded += ok
	r.Billed += ev.Billed
	r.DurationMS += ev.DurationMS
	if err := t.writeRow(kRecord(ev.Agent), rowRecordMove, ev.Agent, int64(1), ok, ev.Billed.Micros(), ev.DurationMS); err != nil {
		return err
	}
	t.wrote(kRecord(ev.Agent), r)
	return nil
}

// Events lists events before sequence number before (0: the newest),
// newest first.
func (t *Tx) Events(before uint64, limit int) ([]*holon.Event, error) {
	start := int64(1<<63 - 1)
	if before != 0 {
		start = int64(before) - 1
	}
	var out []*holon.Event
	err := t.all(`SELECT seq, receipt, agent, status, error, duration_ms, (billed * 1000000)::bigint, currency, delegated, time
		FROM call_events WHERE seq <= $1 ORDER BY seq DESC LIMIT $2`, []any{start, limit}, func(rows pgx.Rows) error {
		ev := new(holon.Event)
		var seq, billed int64
		var errText *string
		var at string
		if err := rows.Scan(&seq, &ev.Receipt, &ev.Agent, &ev.Status, &errText, &ev.DurationMS, &billed, &ev.Currency, &ev.Delegated, &at); err != nil {
			return err
		}
		ev.Seq, ev.Error, ev.Billed = uint64(seq), deref(errText), journal.Amount(billed)
		var err error
		ev.Time, err = parseTime(at)
		out = append(out, ev)
		return err
	})
	return out, err
}

// RecordsAhead makes a View read the records of agents with its next
// round trip (the mandate's and its budget's, mandateAndBudget), or, if
// one of the rows asked for ahead is read first, with that one.
func (t *Tx) RecordsAhead(agents ...string) {
	t.ahead.records = t.wanted(t.ahead.records, kRecord, agents)
}

// AccountsAhead makes a View read accounts with its next round trip, as
// RecordsAhead does records.
func (t *Tx) AccountsAhead(names ...string) {
	t.ahead.accounts = t.wanted(t.ahead.accounts, kAccount, names)
}

// CountersAhead makes a View read counters with its next round trip, as
// RecordsAhead does records.
func (t *Tx) CountersAhead(names ...string) {
	t.ahead.counters = t.wanted(t.ahead.counters, kCounter, names)
}

// wanted adds to list the names whose rows a View has not read yet (none
// in the writer, which reads through its cache).
func (t *Tx) wanted(list []string, key func(string) string, names []string) []string {
	if t.g != nil {
		return list
	}
	for _, n := range names {
		if _, ok := t.cached(key(n)); !ok && !slices.Contains(list, n) {
			list = append(list, n)
		}
	}
	return list
}

// The reads of the rows asked for ahead, by name: accounts, records and
// counters are the sums of their parts (migrations 24 and 25).
const (
	recordsSelect = `SELECT agent, sum(runs)::bigint, sum(succeeded)::bigint, (sum(billed) * 1000000)::bigint, sum(duration_ms)::bigint
		FROM agent_records WHERE agent = ANY($1) GROUP BY agent`
	accountsSelect = `SELECT name, (sum(balance) * 1000000)::bigint, (sum(held) * 1000000)::bigint FROM accounts WHERE name = ANY($1) GROUP BY name`
	countersSelect = `SELECT name, sum(value)::text FROM counters WHERE name = ANY($1) GROUP BY name`
)

// queueAhead queues the reads of the rows asked for ahead, if any, on b:
// readAhead reads their answers.
func (t *Tx) queueAhead(b *pgx.Batch) ahead {
	a := t.ahead
	t.ahead = ahead{}
	if len(a.records) > 0 {
		b.Queue(recordsSelect, a.records)
	}
	if len(a.accounts) > 0 {
		b.Queue(accountsSelect, a.accounts)
	}
	if len(a.counters) > 0 {
		b.Queue(countersSelect, a.counters)
	}
	return a
}

// readAhead keeps the rows read for ahead (queueAhead), those absent as
// absent.
func (t *Tx) readAhead(br pgx.BatchResults, a ahead) error {
	read := func(names []string, key func(string) string, scan func(pgx.Rows) (string, any, error)) error {
		if len(names) == 0 {
			return nil
		}
		rows, err := br.Query()
		if err != nil {
			return t.note(err)
		}
		for rows.Next() {
			name, v, err := scan(rows)
			if err != nil {
				rows.Close()
				return err
			}
			t.read(key(name), v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t.note(err)
		}
		for _, n := range names {
			if _, ok := t.cached(key(n)); !ok {
				t.readAbsent(key(n))
			}
		}
		return nil
	}
	err := read(a.records, kRecord, func(rows pgx.Rows) (string, any, error) {
		var name string
		var r holon.Record
		var billed int64
		err := rows.Scan(&name, &r.Runs, &r.Succeeded, &billed, &r.DurationMS)
		r.Billed = journal.Amount(billed)
		return name, r, err
	})
	if err != nil {
		return err
	}
	err = read(a.accounts, kAccount, func(rows pgx.Rows) (string, any, error) {
		var name string
		var bal, held int64
		err := rows.Scan(&name, &bal, &held)
		return name, holon.Account{Balance: journal.Amount(bal), Held: journal.Amount(held)}, err
	})
	if err != nil {
		return err
	}
	return read(a.counters, kCounter, func(rows pgx.Rows) (string, any, error) {
		var name, v string
		err := rows.Scan(&name, &v)
		if err != nil {
			return name, nil, err
		}
		n, err := strconv.ParseUint(v, 10, 64)
		return name, n, err
	})
}

// sendAhead reads the rows asked for ahead, in a round trip of their
// own: one of them is read before anything else was.
func (t *Tx) sendAhead() error {
	if err := t.err(); err != nil {
		return err
	}
	b := &pgx.Batch{}
	a := t.queueAhead(b)
	t.trip(b.Len())
	br := t.tx.SendBatch(t.ctx, b)
	err := t.readAhead(br, a)
	if cerr := br.Close(); err == nil {
		err = t.note(cerr)
	}
	return err
}

// Record reads an agent version's record.
func (t *Tx) Record(agent string) (holon.Record, error) {
	k := kRecord(agent)
	if c, ok := t.cached(k); ok {
		if c.st == present {
			return c.v.(holon.Record), nil
		}
		return holon.Record{}, nil
	}
	if slices.Contains(t.ahead.records, agent) {
		// The rows asked for ahead, in this round trip.
		if err := t.sendAhead(); err != nil {
			return holon.Record{}, err
		}
		return t.Record(agent)
	}
	var r holon.Record
	var billed int64
	err := t.one(`SELECT sum(runs)::bigint, sum(succeeded)::bigint, (sum(billed) * 1000000)::bigint, sum(duration_ms)::bigint
		FROM agent_records WHERE agent = $1 GROUP BY agent`,
		[]any{agent}, &r.Runs, &r.Succeeded, &billed, &r.DurationMS)
	if err == holon.ErrNotFound {
		t.readAbsent(k)
		return holon.Record{}, nil
	}
	r.Billed = journal.Amount(billed)
	if err == nil {
		t.read(k, r)
	}
	return r, err
}
