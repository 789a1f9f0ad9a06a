package canonical_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"holon.dev/holon/gateway/canonical"
)

// rfc8785Sample is the sample of RFC 8785 §3.2.2, and its canonical form.
const (
	rfc8785Sample = `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	rfc8785SampleCanonical = `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
)

// mustCanonical canonicalizes in and fails the test on an error.
func mustCanonical(t *testing.T, in string) string {
	t.Helper()
	out, err := canonical.JSON([]byte(in))
	if err != nil {
		t.Fatalf("JSON(%q): %v", in, err)
	}
	return string(out)
}

// Ensure that the sample of RFC 8785 §3.2.2 canonicalizes as the RFC says.
func TestJSON_RFC8785Sample(t *testing.T) {
	if got := mustCanonical(t, rfc8785Sample); got != rfc8785SampleCanonical {
		t.Errorf("got  %s\nwant %s", got, rfc8785SampleCanonical)
	}
}

// Ensure that object members are sorted by their keys as UTF-16 code units
// (RFC 8785 §3.2.3), not as UTF-8 bytes or code points: U+1F600, a surrogate
// pair from 0xD83D, sorts before U+20AC and U+FB33.
func TestJSON_SortsKeysByUTF16(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","` + "\u00f6" + `":"Latin Small Letter O With Diaeresis",` +
		`"` + "\u20ac" + `":"Euro Sign","` + "\U0001F600" + `":"Emoji: Grinning Face","` + "\ufb33" + `":"Hebrew Letter Dalet With Dagesh"}`
	if got := mustCanonical(t, in); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}

	for _, tt := range []struct{ in, want string }{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"aa":1,"a":2,"":3}`, `{"":3,"a":2,"aa":1}`},
		{`{"\ue000":1,"\ud800\udc00":2,"\ud7ff":3}`, `{"` + "\ud7ff" + `":3,"𐀀":2,"` + "\ue000" + `":1}`},
		{`{"\ud83d\ude01":1,"\ud83d\ude00":2}`, `{"😀":2,"😁":1}`},
		{`{"z":{"y":1,"x":[{"b":1,"a":2}]},"a":null}`, `{"a":null,"z":{"x":[{"a":2,"b":1}],"y":1}}`},
	} {
		if got := mustCanonical(t, tt.in); got != tt.want {
			t.Errorf("JSON(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// Ensure that strings are written as ECMAScript's JSON.stringify writes
// them: only '"', '\' and control characters escaped, everything else raw.
func TestJSON_Strings(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"short escapes", `"\b\t\n\f\r"`, `"\b\t\n\f\r"`},
		{"other controls", `"\u0000\u0001\u001F\u000b"`, `"\u0000\u0001\u001f\u000b"`},
		{"quote and backslash", `"\"\\"`, `"\"\\"`},
		{"solidus", `"\/"`, `"/"`},
		{"html characters", `"\u003c\u003e\u0026<>&"`, `"<>&<>&"`},
		{"delete", `"\u007f"`, "\"\x7f\""},
		{"line separators", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"escaped non-ASCII", `"\u00E9\u20AC"`, `"é€"`},
		{"raw non-ASCII", `"é€😀"`, `"é€😀"`},
		{"surrogate pair", `"\uD83D\uDE00"`, `"😀"`},
		{"noncharacter", `"\uffff"`, "\"\uffff\""},
		{"empty", `""`, `""`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustCanonical(t, tt.in); got != tt.want {
				t.Errorf("JSON(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// Ensure that numbers are written as ECMAScript's Number.prototype.toString
// writes the IEEE-754 double they denote.
func TestJSON_Numbers(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"0", "0"},
		{"-0", "0"},
		{"-0.0e+5", "0"},
		{"1", "1"},
		{"-1", "-1"},
		{"1.5", "1.5"},
		{"4.50", "4.5"},
		{"1E30", "1e+30"},
		{"1e21", "1e+21"},
		{"1e20", "100000000000000000000"},
		{"123456789012345680000", "123456789012345680000"},
		{"12345678901234567890123", "1.2345678901234568e+22"},
		{"1e-6", "0.000001"},
		{"0.000001234", "0.000001234"},
		{"1e-7", "1e-7"},
		{"-1e-7", "-1e-7"},
		{"1.5e-7", "1.5e-7"},
		{"123e-20", "1.23e-18"},
		{"0.30000000000000004", "0.30000000000000004"},
		{"5e-324", "5e-324"},
		{"1e-400", "0"}, // rounds to zero, as in ECMAScript
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"-1.7976931348623157e308", "-1.7976931348623157e+308"},
		{"9007199254740993", "9007199254740992"},
		{"333333333.33333329", "333333333.3333333"},
		{"1e300", "1e+300"},
	} {
		if got := mustCanonical(t, tt.in); got != tt.want {
			t.Errorf("JSON(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// Ensure that the IEEE-754 values of RFC 8785 Appendix B are written as the
// RFC says.
func TestJSON_RFC8785Numbers(t *testing.T) {
	for _, tt := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	} {
		f := math.Float64frombits(tt.bits)
		// Go's shortest form is valid JSON and denotes the same double.
		in := strconv.FormatFloat(f, 'g', -1, 64)
		if got := mustCanonical(t, in); got != tt.want {
			t.Errorf("%016x (%s): got %s, want %s", tt.bits, in, got, tt.want)
		}
	}
}

// Ensure that whitespace is dropped and every kind of value is kept.
func TestJSON_Values(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{" \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } , \"c\" : [ ] }\n", `{"a":[1,2],"b":{},"c":[]}`},
		{`null`, `null`},
		{` true `, `true`},
		{`false`, `false`},
		{`"x"`, `"x"`},
		{`-12.5e1`, `-125`},
		{`[[[]],{"a":{"b":[null]}}]`, `[[[]],{"a":{"b":[null]}}]`},
		{strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10000) + strings.Repeat("]", 10000)},
	} {
		if got := mustCanonical(t, tt.in); got != tt.want {
			t.Errorf("JSON(%.40q) = %.40s, want %.40s", tt.in, got, tt.want)
		}
	}
}

// Ensure that input that is not I-JSON is refused with an *Error whose
// message names the problem and whose offset is within the input.
func TestJSON_Errors(t *testing.T) {
	for _, tt := range []struct{ name, in, msg string }{
		{"empty", ``, "unexpected end of input"},
		{"only whitespace", "  \n", "unexpected end of input"},
		{"unclosed object", `{"a":1`, "end of input in object"},
		{"unclosed array", `[1`, "end of input in array"},
		{"unclosed string", `"abc`, "end of input in string"},
		{"trailing comma in array", `[1,]`, "want a JSON value"},
		{"trailing comma in object", `{"a":1,}`, "want a string key"},
		{"missing colon", `{"a" 1}`, "want ':'"},
		{"unquoted key", `{a:1}`, "want a string key"},
		{"number key", `{1:1}`, "want a string key"},
		{"single quotes", `'a'`, "want a JSON value"},
		{"leading zero", `01`, "after the JSON value"},
		{"bare point", `1.`, "digit after '.'"},
		{"leading point", `.5`, "want a JSON value"},
		{"plus sign", `+1`, "want a JSON value"},
		{"lone minus", `-`, "want a digit"},
		{"empty exponent", `1e`, "digit in the exponent"},
		{"NaN", `NaN`, "want a JSON value"},
		{"Infinity", `-Infinity`, "want a digit"},
		{"bad literal", `tru`, "want true"},
		{"bad escape", `"\x"`, "invalid escape"},
		{"short unicode escape", `"\u12"`, `invalid \u escape`},
		{"raw control character", "\"a\nb\"", "unescaped control character 0x0a"},
		{"byte order mark", "\ufeff{}", "want a JSON value"},
		{"trailing garbage", `{"a":1} x`, "unexpected 'x' after the JSON value"},
		{"two values", `[1] [2]`, "after the JSON value"},
		{"duplicate key", `{"a":1,"b":2,"a":3}`, `duplicate key "a" at byte 13`},
		{"duplicate key escaped", `{"a":1,"\u0061":2}`, `duplicate key "a"`},
		{"nested duplicate key", `[{"x":{"k":1,"k":1}}]`, `duplicate key "k"`},
		{"lone high surrogate", `"\ud800"`, `lone surrogate \ud800`},
		{"lone low surrogate", `"\udc00"`, `lone surrogate \udc00`},
		{"reversed pair", `"\ude00\ud83d"`, `lone surrogate \ude00`},
		{"high surrogate then letter", `"\ud800\u0041"`, `lone surrogate \ud800`},
		{"high surrogate then raw", `"\ud800x"`, `lone surrogate \ud800`},
		{"invalid UTF-8", "\"\xff\"", "invalid UTF-8"},
		{"truncated UTF-8", "\"\xe2\x82\"", "invalid UTF-8"},
		{"encoded surrogate", "\"\xed\xa0\x80\"", "invalid UTF-8"},
		{"overlong encoding", "\"\xc0\xaf\"", "invalid UTF-8"},
		{"number too large", `1e400`, "number 1e400 is out of the range of a double"},
		{"negative number too large", `[-1e400]`, "number -1e400 is out of the range"},
		{"too deep", strings.Repeat("[", 10001) + strings.Repeat("]", 10001), "nesting deeper than 10000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := canonical.JSON([]byte(tt.in))
			if err == nil {
				t.Fatalf("JSON(%q) = %s, want an error", tt.in, out)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q, want it to contain %q", err, tt.msg)
			}
			var ce *canonical.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v, want a *canonical.Error", err, err)
			}
			if ce.Offset < 0 || ce.Offset > len(tt.in) || !strings.HasSuffix(err.Error(), fmt.Sprintf(" at byte %d", ce.Offset)) {
				t.Errorf("error %q has offset %d, want one within the %d bytes of the input, named in the message", err, ce.Offset, len(tt.in))
			}
			if _, err := canonical.Hash([]byte(tt.in)); err == nil {
				t.Error("Hash succeeded, want an error")
			}
		})
	}
}

// Ensure that Hash is the SHA-256 of the canonical form, so it ignores
// formatting and member order but not values.
func TestHash(t *testing.T) {
	hash := func(in string) string {
		t.Helper()
		h, err := canonical.Hash([]byte(in))
		if err != nil {
			t.Fatalf("Hash(%q): %v", in, err)
		}
		return h
	}

	// The canonical form of the RFC 8785 sample, through sha256sum.
	const sampleHash = "2d5e01a318d0f0879ab568c4be289c8b1f64ef8921a53c6277d5e069978baacb"
	if got := hash(rfc8785Sample); got != sampleHash {
		t.Errorf("sample hash %s, want %s", got, sampleHash)
	}
	sum := sha256.Sum256([]byte(rfc8785SampleCanonical))
	if want := hex.EncodeToString(sum[:]); want != sampleHash {
		t.Fatalf("sha256 of the canonical sample is %s, the test's constant is wrong", want)
	}

	a := hash(`{"query":"cats","limit":10,"filters":{"lang":["en","fr"],"safe":true}}`)
	b := hash("{\n  \"filters\": { \"safe\": true, \"lang\": [ \"en\", \"fr\" ] },\n  \"limit\": 1.0e1,\n  \"query\": \"\\u0063ats\"\n}\n")
	if a != b {
		t.Errorf("equal documents hash differently: %s and %s", a, b)
	}
	for _, other := range []string{
		`{"query":"cats","limit":11,"filters":{"lang":["en","fr"],"safe":true}}`,
		`{"query":"cats","limit":10,"filters":{"lang":["fr","en"],"safe":true}}`,
		`{"query":"Cats","limit":10,"filters":{"lang":["en","fr"],"safe":true}}`,
		`{"query":"cats","limit":"10","filters":{"lang":["en","fr"],"safe":true}}`,
		`{"query":"cats","limit":10,"filters":{"lang":["en","fr"],"safe":true},"x":null}`,
	} {
		if hash(other) == a {
			t.Errorf("%s hashes like a different document", other)
		}
	}
	if len(a) != 64 || strings.ToLower(a) != a {
		t.Errorf("hash %q is not 64 lowercase hex digits", a)
	}
}

func ExampleJSON() {
	out, err := canonical.JSON([]byte(`{ "b": [1.0, 2e-7, "<\u00e9>"], "a": -0 }`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))

	_, err = canonical.JSON([]byte(`{"a": 1, "a": 2}`))
	fmt.Println(err)
	// Output:
	// {"a":0,"b":[1,2e-7,"<é>"]}
	// duplicate key "a" at byte 9
}

// FuzzJSON checks that whatever JSON accepts is JSON to
// encoding/json, that its output is JSON with the same value, and that the
// output is a fixed point.
func FuzzJSON(f *testing.F) {
	for _, seed := range []string{
		rfc8785Sample,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`[0,-0,1e21,1e20,1e-6,1e-7,5e-324,1.7976931348623157e308,9007199254740993,0.30000000000000004]`,
		`{"a":{"b":[true,false,null,"\u0000\u001f\u007f\u2028"]}}`,
		`"\ud800"`, `{"a":1,"a":2}`, `1e400`, `[1,]`, "\"\xff\"", ` {} `, `-0.0e-0`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := canonical.JSON(in)
		if err != nil {
			var ce *canonical.Error
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > len(in) {
				t.Fatalf("error %T %v, want a *canonical.Error with an offset within the input", err, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted %q, which encoding/json rejects", in)
		}
		if !json.Valid(out) {
			t.Fatalf("output %q of %q is not valid JSON", out, in)
		}
		again, err := canonical.JSON(out)
		if err != nil {
			t.Fatalf("output %q of %q does not canonicalize: %v", out, in, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q gives %q, which gives %q", in, out, again)
		}
		var vin, vout any
		if err := json.Unmarshal(in, &vin); err != nil {
			t.Fatalf("unmarshal input %q: %v", in, err)
		}
		if err := json.Unmarshal(out, &vout); err != nil {
			t.Fatalf("unmarshal output %q: %v", out, err)
		}
		if !reflect.DeepEqual(vin, vout) {
			t.Fatalf("value changed: %q is %#v, its canonical form %q is %#v", in, vin, out, vout)
		}
	})
}
