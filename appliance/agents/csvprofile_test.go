package agents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// csvInput is csv-profile's input for a CSV text.
func csvInput(t *testing.T, csv string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"csv": csv})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Ensure that csv-profile types, counts and orders each column as its
// manifest describes, and that every profile matches its output schema.
func TestCSVProfile(t *testing.T) {
	m := manifest(t, "holon-labs/csv-profile")
	for _, tt := range []struct {
		name, csv, want string
	}{
		{
			name: "one column of each type",
			csv:  "i,n,b,s,e\n1,1.5,true,x,\n-2,3,FALSE,y,\n",
			want: `{"rows":2,"columns":[
				{"name":"i","type":"integer","count":2,"nulls":0,"min":-2,"max":1,"distinct":2},
				{"name":"n","type":"number","count":2,"nulls":0,"min":1.5,"max":3,"distinct":2},
				{"name":"b","type":"boolean","count":2,"nulls":0,"min":false,"max":true,"distinct":2},
				{"name":"s","type":"string","count":2,"nulls":0,"min":"x","max":"y","distinct":2},
				{"name":"e","type":"empty","count":0,"nulls":2,"min":null,"max":null,"distinct":0}]}`,
		},
		{
			name: "null is an empty or blank cell, and NULL or NA is a value",
			csv:  "a,b\n,NULL\n  ,NA\n7,null\n",
			want: `{"rows":3,"columns":[
				{"name":"a","type":"integer","count":1,"nulls":2,"min":7,"max":7,"distinct":1},
				{"name":"b","type":"string","count":3,"nulls":0,"min":"NA","max":"null","distinct":3}]}`,
		},
		{
			name: "integers are exact to 64 bits",
			csv:  "id\n9007199254740993\n-9223372036854775808\n9223372036854775807\n",
			want: `{"rows":3,"columns":[
				{"name":"id","type":"integer","count":3,"nulls":0,"min":-9223372036854775808,"max":9223372036854775807,"distinct":3}]}`,
		},
		{
			// A number column is read as float64: 2⁶³ is written as its
			// shortest float64 form.
			name: "an integer beyond 64 bits makes a number column",
			csv:  "n\n9223372036854775808\n1\n",
			want: `{"rows":2,"columns":[
				{"name":"n","type":"number","count":2,"nulls":0,"min":1,"max":9223372036854776000,"distinct":2}]}`,
		},
		{
			name: "numbers with exponents, signs and bare fractions",
			csv:  "x\n1e3\n.5\n-2.25\n+4\n",
			want: `{"rows":4,"columns":[
				{"name":"x","type":"number","count":4,"nulls":0,"min":-2.25,"max":1000,"distinct":4}]}`,
		},
		{
			name: "NaN, Inf, hexadecimal and underscores are strings, in byte order",
			csv:  "x\nNaN\nInf\n0x10\n1_000\n",
			want: `{"rows":4,"columns":[
				{"name":"x","type":"string","count":4,"nulls":0,"min":"0x10","max":"NaN","distinct":4}]}`,
		},
		{
			name: "distinct counts values, not spellings",
			csv:  "i,n,b,s\n1,1,TRUE,a\n01,1.0,true,A\n+1,1e0,True,a\n",
			want: `{"rows":3,"columns":[
				{"name":"i","type":"integer","count":3,"nulls":0,"min":1,"max":1,"distinct":1},
				{"name":"n","type":"number","count":3,"nulls":0,"min":1,"max":1,"distinct":1},
				{"name":"b","type":"boolean","count":3,"nulls":0,"min":true,"max":true,"distinct":1},
				{"name":"s","type":"string","count":3,"nulls":0,"min":"A","max":"a","distinct":2}]}`,
		},
		{
			name: "types ignore surrounding white space, strings keep it",
			csv:  "n,s\n 42 , a\n7,a\n",
			want: `{"rows":2,"columns":[
				{"name":"n","type":"integer","count":2,"nulls":0,"min":7,"max":42,"distinct":2},
				{"name":"s","type":"string","count":2,"nulls":0,"min":" a","max":"a","distinct":2}]}`,
		},
		{
			name: "quoted fields hold commas, quotes and newlines",
			csv:  "name,address\n\"Doe, Jane\",\"1 Main St\nSpringfield\"\n\"Say \"\"hi\"\"\",x\n",
			want: `{"rows":2,"columns":[
				{"name":"name","type":"string","count":2,"nulls":0,"min":"Doe, Jane","max":"Say \"hi\"","distinct":2},
				{"name":"address","type":"string","count":2,"nulls":0,"min":"1 Main St\nSpringfield","max":"x","distinct":2}]}`,
		},
		{
			name: "a mixed column is a string column",
			csv:  "m\n1\ntrue\n2.5\n",
			want: `{"rows":3,"columns":[
				{"name":"m","type":"string","count":3,"nulls":0,"min":"1","max":"true","distinct":3}]}`,
		},
		{
			name: "CRLF line endings",
			csv:  "a,b\r\n1,x\r\n2,y\r\n",
			want: `{"rows":2,"columns":[
				{"name":"a","type":"integer","count":2,"nulls":0,"min":1,"max":2,"distinct":2},
				{"name":"b","type":"string","count":2,"nulls":0,"min":"x","max":"y","distinct":2}]}`,
		},
		{
			name: "a byte order mark and blank lines are skipped",
			csv:  "\uFEFFa\n\n1\n\n2",
			want: `{"rows":2,"columns":[
				{"name":"a","type":"integer","count":2,"nulls":0,"min":1,"max":2,"distinct":2}]}`,
		},
		{
			name: "a header alone gives empty columns",
			csv:  "a,b\n",
			want: `{"rows":0,"columns":[
				{"name":"a","type":"empty","count":0,"nulls":0,"min":null,"max":null,"distinct":0},
				{"name":"b","type":"empty","count":0,"nulls":0,"min":null,"max":null,"distinct":0}]}`,
		},
		{
			name: "header names are kept as written, empty or repeated",
			csv:  ",a,a\n1,2,3\n",
			want: `{"rows":1,"columns":[
				{"name":"","type":"integer","count":1,"nulls":0,"min":1,"max":1,"distinct":1},
				{"name":"a","type":"integer","count":1,"nulls":0,"min":2,"max":2,"distinct":1},
				{"name":"a","type":"integer","count":1,"nulls":0,"min":3,"max":3,"distinct":1}]}`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, m, csvInput(t, tt.csv)) // checks the output against interface.output
			wantOutput(t, res, tt.want)
			checkCounts(t, res.Output)
		})
	}
}

// checkCounts checks that every column's count and nulls add up to the rows.
func checkCounts(t *testing.T, out []byte) {
	t.Helper()
	var p struct {
		Rows    int
		Columns []struct {
			Name         string
			Count, Nulls int
		}
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Columns {
		if c.Count+c.Nulls != p.Rows {
			t.Errorf("column %q: count %d + nulls %d != rows %d", c.Name, c.Count, c.Nulls, p.Rows)
		}
	}
}

// Ensure that csv-profile refuses, with its declared errors, a CSV without a
// header and a CSV that is not RFC 4180, naming the line.
func TestCSVProfile_Errors(t *testing.T) {
	m := manifest(t, "holon-labs/csv-profile")
	for _, tt := range []struct {
		name, csv, code, message string
	}{
		{"empty", "", "empty_input", "header"},
		{"blank lines only", "\n\r\n\n", "empty_input", "header"},
		{"a row longer than the header", "a,b\n1,2,3\n", "malformed_csv", "line 2"},
		{"a row shorter than the header", "a,b\n1,2\n3\n", "malformed_csv", "line 3"},
		{"a quote inside an unquoted field", "a\nx\"y\n", "malformed_csv", "line 2"},
		{"an unterminated quote", "a\n\"open\n", "malformed_csv", "line 2"},
		{"a row longer than a one-column header", "\uFEFFa\n1,2\n", "malformed_csv", "line 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, m, csvInput(t, tt.csv))
			wantError(t, res, tt.code)
			if !strings.Contains(res.Message, tt.message) {
				t.Errorf("message %q does not mention %q", res.Message, tt.message)
			}
			if declared, billed := m.IsDeclared(tt.code); !declared || billed {
				t.Errorf("%s: declared %v, billed %v; want declared and not billed", tt.code, declared, billed)
			}
		})
	}
}

// Ensure that csv-profile takes a CSV of exactly its limit, counted in
// characters as JSON Schema counts them, and refuses one character more even
// when the gateway's input check is skipped.
func TestCSVProfile_Limit(t *testing.T) {
	m := manifest(t, "holon-labs/csv-profile")
	// 2 + 499,999 × 2 = 1,000,000 characters, and nearly twice as many bytes.
	csv := "h\n" + strings.Repeat("é\n", 499_999)
	res := run(t, m, csvInput(t, csv))
	wantOutput(t, res, `{"rows":499999,"columns":[
		{"name":"h","type":"string","count":499999,"nulls":0,"min":"é","max":"é","distinct":1}]}`)

	over := csvInput(t, csv+"x")
	if err := m.InputSchema().ValidateJSON([]byte(over)); err == nil {
		t.Error("interface.input accepts 1,000,001 characters")
	}
	res = devRuntime().Run(context.Background(), &gateway.Invocation{Manifest: m, Input: json.RawMessage(over), Receipt: "r1"})
	wantError(t, res, "too_large")
}

// Ensure that csv-profile gives the same bytes for the same CSV, run after
// run and runtime after runtime.
func TestCSVProfile_Deterministic(t *testing.T) {
	m := manifest(t, "holon-labs/csv-profile")
	rnd := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	b.WriteString("id,score,flag,city,maybe\n")
	cities := []string{"Berlin", "Paris", "Zürich", "\"Lyon, FR\"", "", "NA"}
	for i := range 5000 {
		fmt.Fprintf(&b, "%d,%d.%02d,%t,%s,%s\n", rnd.IntN(1000)-500, rnd.IntN(100), rnd.IntN(100),
			rnd.IntN(2) == 0, cities[rnd.IntN(len(cities))], []string{"", "1", "x"}[i%3])
	}
	input := csvInput(t, b.String())
	first := run(t, m, input)
	if first.Outcome.Kind != contract.OutcomeOutput {
		t.Fatalf("outcome %v %q: %s", first.Outcome.Kind, first.Outcome.Code, first.Message)
	}
	checkCounts(t, first.Output)
	for i := range 3 {
		again := run(t, m, input)
		if !bytes.Equal(again.Output, first.Output) {
			t.Fatalf("run %d:\n got %s\nwant %s", i+2, again.Output, first.Output)
		}
	}
}
