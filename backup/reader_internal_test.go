package backup

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Ensure that every row Write encodes comes back byte for byte, and that
// the fast decoder and encoding/json read a line the same way.
func FuzzRow_RoundTrip(f *testing.F) {
	f.Add("receipts", []byte{0, 0, 0, 0, 0, 0, 0, 42}, []byte(`{"id":"r42","cost":{"own":"0.10"}}`))
	f.Add("settings", []byte(`weird "key" \ é`), []byte(`[1,2,3]`))
	f.Add("counters", []byte("receipts"), []byte{0, 0, 0, 0, 0, 0, 1, 0})
	f.Add("meta", []byte("journal_head"), []byte("9f86d081884c7d65"))
	f.Add("receipts_by_mandate", []byte("alice/sandbox\x00\x00\x00\x00\x00\x00\x00\x00\x07"), []byte{})
	f.Add("bin", []byte{0xff, 0xfe}, []byte{0x00, 0x01, 0x02})
	f.Add("docs", []byte("k"), []byte("{\"a\":\n1}"))
	f.Add("docs", []byte("k\n"), []byte(`{"a":"\u003c"}`))
	f.Fuzz(func(t *testing.T, bucket string, key, value []byte) {
		if len(key) == 0 || !printable([]byte(bucket)) || bucket == "" {
			return
		}
		line := appendRow(nil, bucket, key, value)
		if bytes.Count(line, []byte("\n")) != 1 || !json.Valid(line) {
			t.Fatalf("not one JSON line: %q", line)
		}
		rd := &Reader{}
		fast, ok := rd.fastRow(line)
		if !ok {
			t.Fatalf("the fast decoder refused a line Write produced: %q", line)
		}
		var l rowLine
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatal(err)
		}
		slow, err := rd.decodeRow(l)
		if err != nil {
			t.Fatal(err)
		}
		for name, r := range map[string]struct {
			b    string
			k, v []byte
		}{"fast": {fast.Bucket, fast.Key, fast.Value}, "json": {slow.Bucket, slow.Key, slow.Value}} {
			if r.b != bucket || !bytes.Equal(r.k, key) || !bytes.Equal(r.v, value) {
				t.Errorf("%s decoder: %q %q %q, want %q %q %q (line %q)", name, r.b, r.k, r.v, bucket, key, value, line)
			}
		}
	})
}

// Ensure that the fast decoder leaves lines in any other form to
// encoding/json rather than misreading them.
func TestFastRow_OtherForms(t *testing.T) {
	for _, line := range []string{
		`{"end":{"rows":1,"sha256":"00"}}` + "\n",
		`{"k":"a","t":"x","v":{}}` + "\n",
		`{"t":"x", "k":"a","v":{}}` + "\n",
		`{"t":"x","k":"\u0061","v":{}}` + "\n",
		`{"t":"x","k":"a","v":{},"extra":1}` + "\n",
		`{"t":"x","k":"a","v":{}}`,
		`{"t":"x","kn":007,"v":{}}` + "\n",
		`{"t":"x","kn":18446744073709551616,"v":{}}` + "\n",
		`{"t":"x","k":"a","v":{} }` + "\n",
		`{"t":"x","k":"a","vn":1,"vs":"b"}` + "\n",
	} {
		if r, ok := (&Reader{}).fastRow([]byte(line)); ok {
			t.Errorf("fast decoder took %q as %+v", line, r)
		}
	}
}
