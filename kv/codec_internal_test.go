package kv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// The hand-written codecs must write exactly what encoding/json writes and
// read exactly what it reads. The records are filled by reflection, so that
// a field added to one of them and forgotten in its codec fails here.

// hotRecords returns one fresh pointer to each record with a hand-written codec.
func hotRecords() []any {
	return []any{&holon.Receipt{}, &holon.Hold{}, &holon.Account{}, &holon.Budget{}, &holon.Record{}, &holon.Event{}, &holon.JournalRow{}, &holon.Doc{}}
}

var oddStrings = []string{
	"", "r42", "alice/bookkeeping-q4", "holon-labs/invoice-pipeline@1.0.0", "settle:r7",
	`quote " and \ backslash`, "<script>&amp;</script>", "tab\tnew\nline\r\b\f", "\x00\x01\x1f\x7f",
	"é ü 中文 🙂", "line\u2028para\u2029", "bad \xff\xfe utf8", "\xc3", strings.Repeat("x", 300),
}

var zones = []*time.Location{time.UTC, time.FixedZone("", 2*3600), time.FixedZone("", -(5*3600 + 30*60)), time.FixedZone("X", 0)}

// fill sets every field of v (a pointer) to a random value.
func fill(r *rand.Rand, v reflect.Value) {
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		if r.IntN(8) == 0 {
			v.Set(reflect.ValueOf(time.Time{}))
			return
		}
		t := time.Unix(r.Int64N(4e9), r.Int64N(1e9)*int64(r.IntN(2))).In(zones[r.IntN(len(zones))])
		v.Set(reflect.ValueOf(t))
		return
	case reflect.TypeFor[json.RawMessage]():
		docs := []string{`{"id":"alice/x","budget":{"total":"5.00"}}`, `[1, 2, {"a": "<&>"}]`, `"s"`, `12`, `{"nested": {"deep": [true, false, null]}}`}
		v.SetBytes([]byte(docs[r.IntN(len(docs))]))
		return
	case reflect.TypeFor[journal.Amount]():
		amounts := []int64{0, 1, 10, 100_000, 1_000_000, 4_725, 123_456_789, math.MaxInt64}
		v.SetInt(amounts[r.IntN(len(amounts))])
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(oddStrings[r.IntN(len(oddStrings))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int64:
		v.SetInt(r.Int64N(1e12) - 1e6)
	case reflect.Uint64:
		v.SetUint(r.Uint64N(1e12))
	case reflect.Pointer:
		if r.IntN(3) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(r, p.Elem())
		v.Set(p)
	case reflect.Slice:
		switch r.IntN(4) {
		case 0:
			v.SetZero()
			return
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1+r.IntN(4), 4)
		for i := range s.Len() {
			fill(r, s.Index(i))
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i))
			}
		}
	default:
		panic(fmt.Sprintf("fill: no rule for %s", v.Type()))
	}
}

// signedAllowed says whether a record may hold negative amounts (an
// account's balance, a journal line); elsewhere they are refused on read.
func makeSigned(r *rand.Rand, v any) {
	switch v := v.(type) {
	case *holon.Account:
		if r.IntN(2) == 0 {
			v.Balance = -v.Balance
		}
	case *holon.JournalRow:
		for i := range v.Lines {
			if r.IntN(2) == 0 {
				v.Lines[i].Amount = -v.Lines[i].Amount
			}
		}
	}
}

// Ensure that the hand-written encoders write exactly json.Marshal's bytes.
func TestEncode_SameAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		for _, v := range hotRecords() {
			fill(r, reflect.ValueOf(v).Elem())
			makeSigned(r, v)
			arg := v
			switch v := v.(type) { // putJSON passes these by value
			case *holon.Account:
				arg = *v
			case *holon.Budget:
				arg = *v
			case *holon.Record:
				arg = *v
			}
			want, wantErr := json.Marshal(arg)
			got, err := encodeValue([]byte("prefix"), arg)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%d %T: err %v, json.Marshal err %v", i, v, err, wantErr)
			}
			if err == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Fatalf("%d %T:\n got %s\nwant %s", i, v, got[len("prefix"):], want)
			}
		}
	}
}

// Ensure that a time json.Marshal refuses is refused too.
func TestEncode_BadTime(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 3600+7)),
	} {
		h := &holon.Hold{Started: tm}
		_, wantErr := json.Marshal(h)
		got, err := encodeValue(nil, h)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%v: err %v, json.Marshal err %v", tm, err, wantErr)
		}
		if want, _ := json.Marshal(h); err == nil && !bytes.Equal(got, want) {
			t.Errorf("%v:\n got %s\nwant %s", tm, got, want)
		}
	}
}

// sameDecode checks that decodeValue reads data as json.Unmarshal does.
func sameDecode(t *testing.T, proto any, data []byte) {
	t.Helper()
	typ := reflect.TypeOf(proto).Elem()
	want, got := reflect.New(typ), reflect.New(typ)
	wantErr := json.Unmarshal(data, want.Interface())
	err := decodeValue(data, got.Interface())
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s %q: err %v, json.Unmarshal err %v", typ, data, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got.Interface(), want.Interface()) {
		t.Fatalf("%s %q:\n got %+v\nwant %+v", typ, data, got.Elem().Interface(), want.Elem().Interface())
	}
}

// variants are the same document written differently: the fast path must
// take each or fall back, never read it otherwise.
func variants(doc []byte) [][]byte {
	out := [][]byte{doc,
		bytes.ReplaceAll(doc, []byte(`,"`), []byte(" ,\n\t\"")),
		bytes.ReplaceAll(doc, []byte(`":`), []byte(`" : `)),
		bytes.Replace(doc, []byte(`{"`), []byte(`{"unknown":[1,{"x":null}],"`), 1),
		bytes.Replace(doc, []byte(`{"`), []byte(`{"ID":"x","`), 1),
		bytes.ReplaceAll(doc, []byte(`"0.`), []byte(`"\u0030.`)),
		bytes.ReplaceAll(doc, []byte(`":"`), []byte(`":null,"x":"`)),
		bytes.ReplaceAll(doc, []byte(`":"`), []byte(`":null,"`)),
		bytes.ReplaceAll(doc, []byte(`":[`), []byte(`":null,"children":[`)),
		bytes.ReplaceAll(doc, []byte(`"`), []byte(`'`)),
		append(append([]byte(nil), doc...), " \n"...),
		append(append([]byte(nil), doc...), "x"...),
		append(append([]byte(nil), doc...), "{}"...),
		doc[:len(doc)/2],
		bytes.ReplaceAll(doc, []byte(`:0`), []byte(`:00`)),
		bytes.ReplaceAll(doc, []byte(`:1`), []byte(`:1.0`)),
		bytes.ReplaceAll(doc, []byte(`:1`), []byte(`:1e0`)),
		bytes.ReplaceAll(doc, []byte(`:1`), []byte(`:-1`)),
		bytes.ReplaceAll(doc, []byte(`:1`), []byte(`:- 1`)),
		bytes.ReplaceAll(doc, []byte(`:1`), []byte(`:99999999999999999999`)),
		bytes.ReplaceAll(doc, []byte(`true`), []byte(`"true"`)),
		bytes.ReplaceAll(doc, []byte(`"-`), []byte(`"--`)),
		bytes.ReplaceAll(doc, []byte(`.00"`), []byte(`.0000001"`)),
		bytes.ReplaceAll(doc, []byte(`Z"`), []byte(`z"`)),
		bytes.ReplaceAll(doc, []byte(`"balance":`), []byte(`"held":`)),
		bytes.ReplaceAll(doc, []byte(`}`), []byte(`,}`)),
		bytes.ReplaceAll(doc, []byte(`]`), []byte(`,]`)),
	}
	return out
}

// Ensure that the fast decoders read what encoding/json reads, and refuse
// what it refuses.
func TestDecode_SameAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 1500 {
		for _, v := range hotRecords() {
			fill(r, reflect.ValueOf(v).Elem())
			makeSigned(r, v)
			doc, err := json.Marshal(v)
			if err != nil {
				continue
			}
			for _, d := range variants(doc) {
				sameDecode(t, v, d)
			}
		}
	}
}

// FuzzDecode holds the fast decoders to encoding/json on any input.
func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		for _, v := range hotRecords() {
			fill(r, reflect.ValueOf(v).Elem())
			if doc, err := json.Marshal(v); err == nil {
				f.Add(doc)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range hotRecords() {
			sameDecode(t, v, data)
		}
	})
}

// Ensure that encode's arena never lets a later value overwrite an earlier one.
func TestTx_Encode_Arena(t *testing.T) {
	tx := &Tx{writable: true}
	var vals [][]byte
	var want []string
	for i := range 5000 {
		b := holon.Budget{Spent: journal.Amount(i), Reserved: journal.Amount(i * 7)}
		if i%100 == 0 { // now and then one larger than a block's rest
			r := &holon.Receipt{ID: fmt.Sprintf("r%d", i), Mandate: strings.Repeat("m", 3000)}
			v, err := tx.encode(r)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := json.Marshal(r)
			vals, want = append(vals, v), append(want, string(w))
			continue
		}
		v, err := tx.encode(b)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := json.Marshal(b)
		vals, want = append(vals, v), append(want, string(w))
	}
	for i := range vals {
		if string(vals[i]) != want[i] {
			t.Fatalf("value %d = %s, want %s", i, vals[i], want[i])
		}
	}
}
