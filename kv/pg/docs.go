package pg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// appBuckets are the buckets Put, Get, Delete and ForEach reach, as in the
// embedded store; appendOnly refuse rewrites.
var (
	appBuckets = map[string]bool{
		holon.BucketSignIn: true, holon.BucketUsers: true, holon.BucketEmails: true, holon.BucketKeys: true,
		holon.BucketIdempotency: true, holon.BucketModLog: true, holon.BucketCredentials: true, holon.BucketFiles: true,
		holon.BucketSettings: true, holon.BucketSessions: true, holon.BucketEvals: true, holon.BucketEvalQueue: true,
		holon.BucketOAuth: true, holon.BucketRefunds: true,
		holon.BucketAlerts: true, holon.BucketWebhooks: true, holon.BucketAlertOutbox: true,
	}
	appendOnly = map[string]bool{holon.BucketModLog: true, holon.BucketRefunds: true, holon.BucketAlerts: true}
)

// docTable is where a bucket's documents live: credentials and sign-in
// records in their own tables (documents kept as written, columns
// generated from them), everything else in app_docs.
type docTable struct {
	get, del, walk string
	// put writes a document of a table of its own, given its key and the
	// document (app_docs' go as rows, rows.go).
	put string
	// guard checks a document written as read (guards.go).
	guard guardTable
}

var (
	appDocTable = docTable{
		get:   `SELECT coalesce(convert_to(doc::text, 'UTF8'), raw) FROM app_docs WHERE bucket = $1 AND key_bytes = $2`,
		del:   `DELETE FROM app_docs WHERE bucket = $1 AND key_bytes = $2`,
		walk:  `SELECT key_bytes, coalesce(convert_to(doc::text, 'UTF8'), raw) FROM app_docs WHERE bucket = $1 AND key_bytes >= $2 ORDER BY key_bytes LIMIT $3`,
		guard: guardTable{"app_docs", "bucket = $1 AND key_bytes = $2", "coalesce(convert_to(doc::text, 'UTF8'), raw) = $3"},
	}
	ownTables = map[string]docTable{
		holon.BucketCredentials: keyDocTable("credentials", "agent"),
		holon.BucketSignIn:      keyDocTable("signin", "key"),
	}
)

func keyDocTable(table, key string) docTable {
	row := `$1 <> '' AND ` + key + ` = convert_from($2, 'UTF8')`
	return docTable{
		get:   `SELECT convert_to(doc::text, 'UTF8') FROM ` + table + ` WHERE ` + row,
		put:   `INSERT INTO ` + table + ` (` + key + `, doc) VALUES (convert_from($1, 'UTF8'), $2) ON CONFLICT (` + key + `) DO UPDATE SET doc = EXCLUDED.doc`,
		del:   `DELETE FROM ` + table + ` WHERE ` + row,
		guard: guardTable{table, row, "convert_to(doc::text, 'UTF8') = $3"},
		walk:  `SELECT convert_to(` + key + `, 'UTF8'), convert_to(doc::text, 'UTF8') FROM ` + table + ` WHERE $1 <> '' AND ` + key + ` >= convert_from($2, 'UTF8') COLLATE "C" ORDER BY ` + key + ` COLLATE "C" LIMIT $3`,
	}
}

func tableOf(bucket string) docTable {
	if t, ok := ownTables[bucket]; ok {
		return t
	}
	return appDocTable
}

func (t *Tx) appBucket(name string) error {
	if !appBuckets[name] {
		return fmt.Errorf("%q is not an app bucket", name)
	}
	return nil
}

// getRaw reads a stored value (ErrNotFound).
func (t *Tx) getRaw(bucket string, key []byte) ([]byte, error) {
	k := kDoc(bucket, key)
	if c, ok := t.cached(k); ok {
		t.saw(k, c)
		if c.st == present {
			return bytes.Clone(c.v.([]byte)), nil
		}
		return nil, holon.ErrNotFound
	}
	var v []byte
	err := t.one(tableOf(bucket).get, []any{bucket, key}, &v)
	switch {
	case err == holon.ErrNotFound:
		t.readAbsent(k)
		t.saw(k, entry{st: absent})
	case err == nil:
		t.read(k, bytes.Clone(v))
		t.saw(k, entry{v: bytes.Clone(v)})
	}
	return v, err
}

// putRaw stores a value: a JSON document as json, anything else as bytes.
func (t *Tx) putRaw(bucket string, key, value []byte) error {
	return t.putValue(bucket, key, value, isDocument(value))
}

// putValue is putRaw of a value known to be a JSON document on one line,
// or not.
func (t *Tx) putValue(bucket string, key, value []byte, document bool) error {
	var doc, raw any
	if document {
		doc = string(value)
	} else {
		raw = value
	}
	tb := tableOf(bucket)
	if tb != appDocTable {
		doc = string(value)
	}
	if err := t.guard(kDoc(bucket, key)); err != nil {
		return err
	}
	if tb == appDocTable {
		// Sent with the other documents of its round trip (rows.go).
		var d *string
		if doc != nil {
			s := doc.(string)
			d = &s
		}
		r, _ := raw.([]byte)
		if err := t.appendRows(kDoc(bucket, key), rowAppDoc, nil, []any{bucket, keyText(key), bytes.Clone(key), d, r}); err != nil {
			return err
		}
	} else if err := t.execFree(tb.put, key, doc); err != nil {
		return err
	}
	t.wrote(kDoc(bucket, key), bytes.Clone(value))
	return t.registryMoved(bucket, key)
}

// registryMoved moves holon.RegistryRevision when a write changes what the
// gateways' registries hold: a verdict or a yank (putDoc moves it for an
// agent version).
func (t *Tx) registryMoved(bucket string, key []byte) error {
	if bucket == holon.BucketEvals || bucket == holon.BucketSettings && bytes.HasPrefix(key, []byte("yanked/")) {
		defer t.inside()()
		_, err := t.AddCounter(holon.RegistryRevision, 1)
		return err
	}
	return nil
}

// walk calls fn for the bucket's values from key from on, in key order, a
// page at a time, until fn returns false.
func (t *Tx) walk(bucket string, from []byte, fn func(k, v []byte) (bool, error)) error {
	if from == nil {
		from = []byte{}
	}
	for {
		type kv struct{ k, v []byte }
		var page []kv
		err := t.all(tableOf(bucket).walk, []any{bucket, from, pageSize}, func(rows pgx.Rows) error {
			var x kv
			err := rows.Scan(&x.k, &x.v)
			page = append(page, x)
			return err
		})
		if err != nil {
			return err
		}
		for _, x := range page {
			more, err := fn(x.k, x.v)
			if err != nil || !more {
				return err
			}
			from = append(x.k[:len(x.k):len(x.k)], 0)
		}
		if len(page) < pageSize {
			return nil
		}
	}
}

// Put stores v as JSON under key.
func (t *Tx) Put(bucket, key string, v any) error {
	if err := t.appBucket(bucket); err != nil {
		return err
	}
	if err := t.writable(); err != nil {
		return err
	}
	if appendOnly[bucket] {
		if _, err := t.getRaw(bucket, []byte(key)); err == nil {
			return fmt.Errorf("%s is append-only: %s exists", bucket, key)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return t.putRaw(bucket, []byte(key), b)
}

// Get reads the document under key into v.
func (t *Tx) Get(bucket, key string, v any) error {
	if err := t.appBucket(bucket); err != nil {
		return err
	}
	b, err := t.getRaw(bucket, []byte(key))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s/%s: %w", bucket, key, err)
	}
	return nil
}

// Delete removes a document.
func (t *Tx) Delete(bucket, key string) error {
	if err := t.appBucket(bucket); err != nil {
		return err
	}
	if appendOnly[bucket] {
		return fmt.Errorf("%s is append-only", bucket)
	}
	if err := t.guard(kDoc(bucket, []byte(key))); err != nil {
		return err
	}
	if err := t.execRow(kDoc(bucket, []byte(key)), tableOf(bucket).del, bucket, []byte(key)); err != nil {
		return err
	}
	t.wroteAbsent(kDoc(bucket, []byte(key)))
	return t.registryMoved(bucket, []byte(key))
}

// ForEach calls fn for every document whose key starts with prefix.
func (t *Tx) ForEach(bucket, prefix string, fn func(key string, raw json.RawMessage) (bool, error)) error {
	return t.ForEachAfter(bucket, prefix, "", fn)
}

// ForEachAfter is ForEach from the first key after after.
func (t *Tx) ForEachAfter(bucket, prefix, after string, fn func(key string, raw json.RawMessage) (bool, error)) error {
	if err := t.appBucket(bucket); err != nil {
		return err
	}
	start := []byte(prefix)
	if after > prefix {
		start = []byte(after + "\x00")
	}
	p := []byte(prefix)
	return t.walk(bucket, start, func(k, v []byte) (bool, error) {
		if !bytes.HasPrefix(k, p) {
			return false, nil
		}
		return fn(string(k), v)
	})
}

// Append stores v under the bucket's next sequence number.
func (t *Tx) Append(bucket string, v any) (uint64, error) {
	if err := t.appBucket(bucket); err != nil {
		return 0, err
	}
	seq, err := t.nextSeq(bucket)
	if err != nil {
		return 0, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	return seq, t.putRaw(bucket, u64(seq), b)
}

// The registry: mandates and agent versions.

func (t *Tx) putDoc(table, key, id string, d holon.Doc) error {
	doc := d.Doc
	if len(doc) == 0 {
		doc = json.RawMessage("null")
	}
	// As json.Marshal writes it (compact, HTML-escaped), as the
	// embedded store keeps it.
	compact, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("%s %s: %w", table, id, err)
	}
	if err := t.guard(kRegistry(table, id)); err != nil {
		return err
	}
	if err := t.execFree(`INSERT INTO `+table+` (`+key+`, doc, created, published, yanked, revoked) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (`+key+`) DO UPDATE SET doc = EXCLUDED.doc, created = EXCLUDED.created, published = EXCLUDED.published,
			yanked = EXCLUDED.yanked, revoked = EXCLUDED.revoked`, id, string(compact), ts(d.Created), d.Published, optText(d.Yanked), d.Revoked); err != nil {
		return err
	}
	c := holon.Doc{Doc: json.RawMessage(compact), Published: d.Published, Yanked: d.Yanked, Revoked: d.Revoked}
	c.Created, _ = parseTime(ts(d.Created)) // as it reads back
	t.wrote(kRegistry(table, id), c)
	if table == "agents" {
		_, err := t.AddCounter(holon.RegistryRevision, 1)
		return err
	}
	return nil
}

func scanDoc(rows pgx.Rows) (string, holon.Doc, error) {
	var k, doc, created string
	var yanked *string
	var d holon.Doc
	if err := rows.Scan(&k, &doc, &created, &d.Published, &yanked, &d.Revoked); err != nil {
		return "", d, err
	}
	d.Doc, d.Yanked = json.RawMessage(doc), deref(yanked)
	var err error
	d.Created, err = parseTime(created)
	return k, d, err
}

func (t *Tx) doc(table, key, id string) (holon.Doc, error) {
	k := kRegistry(table, id)
	if c, ok := t.cached(k); ok {
		t.saw(k, c)
		if c.st == present {
			d := c.v.(holon.Doc)
			d.Doc = bytes.Clone(d.Doc)
			return d, nil
		}
		return holon.Doc{}, holon.ErrNotFound
	}
	if _, ok := t.cached(kBudget(id)); t.g == nil && table == "mandates" && !ok {
		return t.mandateAndBudget(k, id)
	}
	var d holon.Doc
	found := false
	err := t.all(`SELECT `+key+`, doc::text, created, published, yanked, revoked FROM `+table+` WHERE `+key+` = $1`, []any{id}, func(rows pgx.Rows) (err error) {
		_, d, err = scanDoc(rows)
		found = true
		return err
	})
	switch {
	case err == nil && !found:
		t.readAbsent(k)
		t.saw(k, entry{st: absent})
		err = holon.ErrNotFound
	case err == nil:
		c := d
		c.Doc = bytes.Clone(d.Doc)
		t.read(k, c)
		t.saw(k, entry{v: c})
	}
	return d, err
}

// mandateAndBudget is doc of a mandate in a View, whose budget it reads
// in the same round trip, kept for the View: a call's admission reads a
// mandate and then its budget, in one View (its snapshot is one, so the
// two read together are what the two read apart would have been).
func (t *Tx) mandateAndBudget(k, id string) (holon.Doc, error) {
	if err := t.err(); err != nil {
		return holon.Doc{}, err
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT id, doc::text, created, published, yanked, revoked FROM mandates WHERE id = $1`, id)
	b.Queue(budgetSelect, id)
	ahead := t.queueAhead(b)
	t.trip(b.Len())
	br := t.tx.SendBatch(t.ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return holon.Doc{}, t.note(err)
	}
	var d holon.Doc
	found := false
	for rows.Next() {
		found = true
		if _, d, err = scanDoc(rows); err != nil {
			rows.Close()
			return holon.Doc{}, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return holon.Doc{}, t.note(err)
	}
	var spent, reserved int64
	switch err := br.QueryRow().Scan(&spent, &reserved); {
	case errors.Is(err, pgx.ErrNoRows):
		t.readAbsent(kBudget(id))
	case err != nil:
		return holon.Doc{}, t.note(err)
	default:
		t.read(kBudget(id), holon.Budget{Spent: journal.Amount(spent), Reserved: journal.Amount(reserved)})
	}
	if err := t.readAhead(br, ahead); err != nil {
		return holon.Doc{}, err
	}
	if !found {
		t.readAbsent(k)
		return holon.Doc{}, holon.ErrNotFound
	}
	c := d
	c.Doc = bytes.Clone(d.Doc)
	t.read(k, c)
	return d, nil
}

func (t *Tx) forEachDoc(table, key string, fn func(id string, d holon.Doc) error) error {
	after := ""
	for first := true; ; first = false {
		type row struct {
			id string
			d  holon.Doc
		}
		var page []row
		err := t.all(`SELECT `+key+`, doc::text, created, published, yanked, revoked FROM `+table+`
			WHERE $1 OR `+key+` > $2 COLLATE "C" ORDER BY `+key+` COLLATE "C" LIMIT $3`, []any{first, after, pageSize}, func(rows pgx.Rows) error {
			id, d, err := scanDoc(rows)
			page = append(page, row{id, d})
			return err
		})
		if err != nil {
			return err
		}
		for _, r := range page {
			if err := fn(r.id, r.d); err != nil {
				return err
			}
			after = r.id
		}
		if len(page) < pageSize {
			return nil
		}
	}
}

// PutMandate writes a mandate.
func (t *Tx) PutMandate(id string, d holon.Doc) error { return t.putDoc("mandates", "id", id, d) }

// Mandate reads a mandate.
func (t *Tx) Mandate(id string) (holon.Doc, error) { return t.doc("mandates", "id", id) }

// MandateRevision is the mandate's record as the store encodes it: equal
// in two transactions only if the record did not change.
func (t *Tx) MandateRevision(id string) []byte {
	d, err := t.Mandate(id)
	if err != nil {
		return nil
	}
	// Every field of the record, without encoding it (a settlement on a
	// store several gateways share reads it under the writers' lock):
	// its flags, its time, then its document.
	b := make([]byte, 0, len(d.Doc)+48)
	b = strconv.AppendInt(b, int64(len(d.Yanked)), 10)
	b = append(b, ':')
	b = append(b, d.Yanked...)
	b = strconv.AppendBool(b, d.Published)
	b = strconv.AppendBool(b, d.Revoked)
	b = d.Created.AppendFormat(b, time.RFC3339Nano)
	b = append(b, 0)
	return append(b, d.Doc...)
}

// ForEachMandate calls fn for every mandate, in id order.
func (t *Tx) ForEachMandate(fn func(id string, d holon.Doc) error) error {
	return t.forEachDoc("mandates", "id", fn)
}

// PutAgent writes an agent version.
func (t *Tx) PutAgent(ref string, d holon.Doc) error { return t.putDoc("agents", "ref", ref, d) }

// Agent reads an agent version.
func (t *Tx) Agent(ref string) (holon.Doc, error) { return t.doc("agents", "ref", ref) }

// ForEachAgent calls fn for every agent version, in ref order.
func (t *Tx) ForEachAgent(fn func(ref string, d holon.Doc) error) error {
	return t.forEachDoc("agents", "ref", fn)
}

// Earnings and latency are documents in app_docs (buckets earnings and
// latency), as in the embedded store.

// markFrom records the number a count counts from: the lowest a row it
// counted may have (a journal entry, a call event). That is the number
// the update last handed out in bucket, the row it counts (else one it
// hands out now, skipped: no row this writer numbers later is below it).
// Writers hand out numbers from blocks (numbers.go), so a row numbered
// below the mark may be counted after it was set: the mark only goes
// down, and rows below it were never counted (those of a backup written
// before the counters existed).
func (t *Tx) markFrom(key, bucket string) error {
	n, ok := t.numbered[bucket]
	if !ok {
		var err error
		if n, err = t.nextSeq(bucket); err != nil {
			return err
		}
	}
	// The mark is written whole: what the update saw decides it.
	t.see(kMeta(key))
	if v, ok := t.meta(key); ok {
		if m, err := strconv.ParseUint(v, 10, 64); err == nil && m <= n {
			return nil
		}
	}
	return t.putMeta(key, strconv.FormatUint(n, 10))
}

func (t *Tx) countsFrom(key string) (uint64, bool) {
	v, ok := t.meta(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// AddEarnings adds to a version's earnings in a currency: to the
// writer's part when it only raises them, else to part 0, refused when
// the sum would go below zero.
func (t *Tx) AddEarnings(ref, currency string, paidCalls int64, own, royalties journal.Amount) error {
	defer t.inside()()
	if err := t.markFrom("earnings_from", "journal"); err != nil {
		return err
	}
	raises := paidCalls >= 0 && own >= 0 && royalties >= 0
	part := 0
	if raises {
		part = t.s.chain
	}
	key := PartKey(ref, part)
	e, err := t.earningsPart(key)
	if err != nil {
		return err
	}
	if raises {
		if err := e.Add(currency, paidCalls, own, royalties); err != nil {
			return fmt.Errorf("earnings of %s: %w", ref, err)
		}
	} else {
		// Judged on the sum; part 0 alone may go below zero.
		sum, err := t.Earnings(ref)
		if err != nil {
			return err
		}
		if err := sum.Add(currency, paidCalls, own, royalties); err != nil {
			return fmt.Errorf("earnings of %s: %w", ref, err)
		}
		x := e[currency]
		x.PaidCalls += paidCalls
		x.Own += own
		x.Royalties += royalties
		e[currency] = x
	}
	b, err := earningsJSON(e)
	if err != nil {
		return err
	}
	t.s.memo.put(kDoc("earnings", key), b, e) // e is not used after this
	return t.putValue("earnings", key, b, true)
}

// earningsJSON is json.Marshal(e), written by hand for the currencies
// that need no escaping (every one a gateway takes): each settled call
// rewrites its version's earnings (docs_internal_test.go checks that both
// agree).
func earningsJSON(e holon.Earnings) ([]byte, error) {
	keys := make([]string, 0, len(e))
	for k := range e {
		if !plainKey(k) {
			return json.Marshal(e)
		}
		keys = append(keys, k)
	}
	if e == nil {
		return json.Marshal(e)
	}
	slices.Sort(keys)
	b := make([]byte, 0, 64*len(keys)+2)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		x := e[k]
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, `":{"paid_calls":`...)
		b = strconv.AppendInt(b, x.PaidCalls, 10)
		b = append(b, `,"own":"`...)
		b, _ = x.Own.AppendText(b)
		b = append(b, `","royalties":"`...)
		b, _ = x.Royalties.AppendText(b)
		b = append(b, `"}`...)
	}
	return append(b, '}'), nil
}

// plainKey reports whether JSON writes k as it is, between quotes.
func plainKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// latencyJSON is json.Marshal(l), written by hand (as earningsJSON).
func latencyJSON(l holon.Latency) []byte {
	if l.Counts == nil {
		return []byte(`{"counts":null}`)
	}
	b := make([]byte, 0, 12+4*len(l.Counts))
	b = append(b, `{"counts":[`...)
	for i, c := range l.Counts {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, c, 10)
	}
	return append(b, "]}"...)
}

// Earnings reads a version's earnings: the sum of its parts.
func (t *Tx) Earnings(ref string) (holon.Earnings, error) {
	first, parts, err := t.partsOf("earnings", ref)
	if err != nil {
		return nil, err
	}
	if len(parts) == 1 {
		return t.decodeEarnings(first, parts[0])
	}
	return SumEarnings(parts)
}

// earningsPart reads one part of a version's earnings.
func (t *Tx) earningsPart(key []byte) (holon.Earnings, error) {
	b, err := t.getRaw("earnings", key)
	if err == holon.ErrNotFound {
		return holon.Earnings{}, nil
	}
	if err != nil {
		return nil, err
	}
	return t.decodeEarnings(key, b)
}

// decodeEarnings decodes a part of a version's earnings, kept decoded
// while its bytes stay the same.
func (t *Tx) decodeEarnings(key, b []byte) (holon.Earnings, error) {
	k := kDoc("earnings", key)
	if v, ok := t.s.memo.get(k, b); ok {
		return maps.Clone(v.(holon.Earnings)), nil
	}
	e, err := decodeEarningsPart(b)
	if err != nil {
		return nil, err
	}
	t.s.memo.put(k, b, maps.Clone(e))
	return e, nil
}

// ForEachEarnings walks the versions whose ref starts with prefix.
func (t *Tx) ForEachEarnings(prefix string, fn func(ref string, e holon.Earnings) error) error {
	return t.walkParts("earnings", prefix, func(ref string, parts [][]byte) error {
		e, err := SumEarnings(parts)
		if err != nil {
			return fmt.Errorf("decode earnings %s: %w", ref, err)
		}
		return fn(ref, e)
	})
}

// EarningsFrom is the first journal row counted.
func (t *Tx) EarningsFrom() (uint64, bool) { return t.countsFrom("earnings_from") }

// AddLatency counts one settled run of a version, in the writer's part.
func (t *Tx) AddLatency(ref string, ms int64) error {
	defer t.inside()()
	if err := t.markFrom("latency_from", "call_events"); err != nil {
		return err
	}
	key := PartKey(ref, t.s.chain)
	l, err := t.latencyPart(key)
	if err != nil {
		return err
	}
	l.Counts[holon.LatencyBucket(ms)]++
	b := latencyJSON(l)
	t.s.memo.put(kDoc("latency", key), b, l) // l is not used after this
	return t.putValue("latency", key, b, true)
}

// Latency reads a version's histogram: the sum of its parts.
func (t *Tx) Latency(ref string) (holon.Latency, error) {
	first, parts, err := t.partsOf("latency", ref)
	if err != nil {
		return holon.Latency{}, err
	}
	var l holon.Latency
	if len(parts) == 1 {
		l, err = t.decodeLatency(first, parts[0])
	} else {
		l, err = SumLatency(parts)
	}
	return grown(l), err
}

// latencyPart reads one part of a version's histogram.
func (t *Tx) latencyPart(key []byte) (holon.Latency, error) {
	var l holon.Latency
	b, err := t.getRaw("latency", key)
	if err != nil && err != holon.ErrNotFound {
		return l, err
	}
	if err == nil {
		if l, err = t.decodeLatency(key, b); err != nil {
			return l, err
		}
	}
	return grown(l), nil
}

// decodeLatency decodes a part of a version's histogram, kept decoded
// while its bytes stay the same.
func (t *Tx) decodeLatency(key, b []byte) (holon.Latency, error) {
	var l holon.Latency
	k := kDoc("latency", key)
	if v, ok := t.s.memo.get(k, b); ok {
		l.Counts = slices.Clone(v.(holon.Latency).Counts)
		return l, nil
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, err
	}
	t.s.memo.put(k, b, holon.Latency{Counts: slices.Clone(l.Counts)})
	return l, nil
}

// grown is l with a count for every bucket of holon.LatencyBoundsMS.
func grown(l holon.Latency) holon.Latency {
	if len(l.Counts) != len(holon.LatencyBoundsMS)+1 {
		g := make([]int64, len(holon.LatencyBoundsMS)+1)
		copy(g, l.Counts)
		l.Counts = g
	}
	return l
}

// ForEachLatency walks the versions' histograms.
func (t *Tx) ForEachLatency(fn func(ref string, l holon.Latency) error) error {
	return t.walkParts("latency", "", func(ref string, parts [][]byte) error {
		l, err := SumLatency(parts)
		if err != nil {
			return fmt.Errorf("decode latency %s: %w", ref, err)
		}
		return fn(ref, l)
	})
}

// LatencyFrom is the first call event counted.
func (t *Tx) LatencyFrom() (uint64, bool) { return t.countsFrom("latency_from") }
