package journal_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"holon.dev/holon/journal"
)

// lines parses "bob -0.035, holon 0.0035" into lines, for tables.
func lines(s string) []journal.Line {
	var out []journal.Line
	for _, part := range strings.Split(s, ",") {
		account, amount, _ := strings.Cut(strings.TrimSpace(part), " ")
		a := journal.MustParseAmount(strings.TrimPrefix(amount, "-"))
		if strings.HasPrefix(amount, "-") {
			a = -a
		}
		out = append(out, journal.Line{Account: account, Amount: a})
	}
	return out
}

// Ensure that Validate accepts balanced entries and refuses each kind of
// broken entry with its sentinel error and a message that says what to fix.
func TestEntry_Validate(t *testing.T) {
	for _, tt := range []struct {
		name    string
		entry   journal.Entry
		wantIs  error  // nil: valid
		wantErr string // a fragment of the error
	}{
		{
			name:  "spec settlement",
			entry: journal.Entry{Key: "settle:r4", Lines: lines("bob -0.035, holon 0.0035, lena 0.026775, acme 0.004725")},
		},
		{
			name:  "sign-up credit",
			entry: journal.Entry{Key: "signup:bob", Lines: lines("external:demo-credit -5, bob 5")},
		},
		{
			name:  "extremes that balance",
			entry: journal.Entry{Key: "k", Lines: []journal.Line{{"a", -journal.MaxAmount}, {"b", journal.MaxAmount}}},
		},
		{
			name:   "empty key",
			entry:  journal.Entry{Lines: lines("a -1, b 1")},
			wantIs: journal.ErrNoKey, wantErr: "empty key, want an idempotency key",
		},
		{
			name:   "no lines",
			entry:  journal.Entry{Key: "settle:r4"},
			wantIs: journal.ErrTooFewLines, wantErr: "entry settle:r4: 0 line(s), want at least 2",
		},
		{
			name:   "one line",
			entry:  journal.Entry{Key: "settle:r4", Lines: lines("a 0")},
			wantIs: journal.ErrTooFewLines, wantErr: "1 line(s), want at least 2",
		},
		{
			name:   "empty account",
			entry:  journal.Entry{Key: "settle:r4", Lines: []journal.Line{{"a", -1}, {"", 1}}},
			wantIs: journal.ErrBadAccount, wantErr: "line 2 has no account name",
		},
		{
			name:   "duplicate account",
			entry:  journal.Entry{Key: "settle:r4", Lines: lines("bob -0.035, holon 0.0035, bob 0.0315")},
			wantIs: journal.ErrDuplicateAccount, wantErr: "account bob on lines 1 and 3, want one line per account",
		},
		{
			name:   "off by one micro-unit",
			entry:  journal.Entry{Key: "settle:r4", Lines: lines("bob -0.035, holon 0.0035, lena 0.026775, acme 0.004726")},
			wantIs: journal.ErrUnbalanced, wantErr: "entry settle:r4: lines sum to 0.000001, want 0",
		},
		{
			name:   "money out of nowhere",
			entry:  journal.Entry{Key: "k", Lines: lines("a 1, b 1")},
			wantIs: journal.ErrUnbalanced, wantErr: "lines sum to 2.00, want 0",
		},
		{
			name:   "money lost",
			entry:  journal.Entry{Key: "k", Lines: lines("a -1, b 0.5")},
			wantIs: journal.ErrUnbalanced, wantErr: "lines sum to -0.50, want 0",
		},
		{
			// Summed in order with wrap-around this would be MaxInt64+1 = MinInt64, then 0.
			name:   "credits overflow",
			entry:  journal.Entry{Key: "k", Lines: []journal.Line{{"a", journal.MaxAmount}, {"b", 1}, {"c", math.MinInt64}}},
			wantIs: journal.ErrOverflow, wantErr: "lines move more than",
		},
		{
			name:   "debits overflow",
			entry:  journal.Entry{Key: "k", Lines: []journal.Line{{"a", math.MinInt64}, {"b", -1}, {"c", journal.MaxAmount}}},
			wantIs: journal.ErrUnbalanced, wantErr: "lines move more than",
		},
		{
			name:   "debit with no positive counterpart",
			entry:  journal.Entry{Key: "k", Lines: []journal.Line{{"a", math.MinInt64}, {"b", journal.MaxAmount}}},
			wantIs: journal.ErrUnbalanced, wantErr: "lines sum to -0.000001, want 0",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.entry.Validate()
			if tt.wantIs == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.wantIs) {
				t.Fatalf("Validate = %v, want errors.Is %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// Ensure that Settlement debits the payer the sum of the shares, credits
// each share, and nets a payer that is also a recipient.
func TestSettlement(t *testing.T) {
	for _, tt := range []struct {
		name   string
		payer  string
		shares string
		want   string
	}{
		{
			name:  "spec example",
			payer: "bob", shares: "holon 0.0035, lena 0.026775, acme 0.004725",
			want: "bob -0.035, holon 0.0035, lena 0.026775, acme 0.004725",
		},
		{
			name:  "platform pays a call to a fork of its own agent",
			payer: "holon", shares: "holon 0.01, lena 0.0765, acme 0.0135",
			want: "holon -0.09, lena 0.0765, acme 0.0135",
		},
		{
			name:  "payer is a later recipient",
			payer: "acme", shares: "holon 0.0035, lena 0.026775, acme 0.004725",
			want: "acme -0.030275, holon 0.0035, lena 0.026775",
		},
		{
			name:  "zero shares left out",
			payer: "bob", shares: "holon 0, lena 0.10",
			want: "bob -0.10, lena 0.10",
		},
		{
			name:  "repeated recipient merged",
			payer: "bob", shares: "lena 0.05, acme 0.01, lena 0.04",
			want: "bob -0.10, lena 0.09, acme 0.01",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := journal.Settlement("settle:r4", tt.payer, shares(tt.shares))
			if err != nil {
				t.Fatalf("Settlement: %v", err)
			}
			want := journal.Entry{Key: "settle:r4", Lines: lines(tt.want)}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Settlement\n got %v\nwant %v", got, want)
			}
		})
	}
}

// Ensure that Settlement refuses what must not be journaled.
func TestSettlement_Errors(t *testing.T) {
	for _, tt := range []struct {
		name    string
		key     string
		payer   string
		shares  []journal.Share
		wantIs  error
		wantErr string
	}{
		{name: "no shares", key: "settle:r4", payer: "bob", wantIs: journal.ErrTooFewLines, wantErr: "shares sum to 0"},
		{name: "zero shares", key: "settle:r4", payer: "bob", shares: shares("holon 0, lena 0"), wantIs: journal.ErrTooFewLines, wantErr: "shares sum to 0"},
		{name: "payer receives everything", key: "settle:r4", payer: "holon", shares: shares("holon 0.10"), wantIs: journal.ErrTooFewLines, wantErr: "payer holon receives every share"},
		{name: "negative share", key: "settle:r4", payer: "bob", shares: []journal.Share{{"lena", 10}, {"acme", -1}}, wantErr: "share 2 to acme is -0.000001, want 0 or more"},
		{name: "shares overflow", key: "settle:r4", payer: "bob", shares: []journal.Share{{"lena", journal.MaxAmount}, {"acme", 1}}, wantIs: journal.ErrOverflow},
		{name: "empty payer", key: "settle:r4", payer: "", shares: shares("lena 0.10"), wantIs: journal.ErrBadAccount, wantErr: "payer has no account name"},
		{name: "empty recipient", key: "settle:r4", payer: "bob", shares: []journal.Share{{"", 10}}, wantIs: journal.ErrBadAccount, wantErr: "share 1 has no account name"},
		{name: "empty key", key: "", payer: "bob", shares: shares("lena 0.10"), wantIs: journal.ErrNoKey},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := journal.Settlement(tt.key, tt.payer, tt.shares)
			if err == nil {
				t.Fatalf("Settlement = %v, want an error", got)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Settlement = %v, want errors.Is %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Settlement = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// Ensure that Transfer moves a positive amount between two accounts and
// refuses anything else.
func TestTransfer(t *testing.T) {
	got, err := journal.Transfer("signup:bob", "external:demo-credit", "bob", journal.MustParseAmount("5"))
	if err != nil {
		t.Fatalf("Transfer: %v", err)
	}
	want := journal.Entry{Key: "signup:bob", Lines: lines("external:demo-credit -5, bob 5")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Transfer\n got %v\nwant %v", got, want)
	}

	for _, tt := range []struct {
		name, key, from, to string
		amount              journal.Amount
		wantIs              error
		wantErr             string
	}{
		{name: "zero", key: "k", from: "a", to: "b", amount: 0, wantErr: "want more than 0"},
		{name: "negative", key: "k", from: "a", to: "b", amount: -1, wantErr: "want more than 0"},
		{name: "to itself", key: "k", from: "a", to: "a", amount: 1, wantIs: journal.ErrDuplicateAccount},
		{name: "no key", key: "", from: "a", to: "b", amount: 1, wantIs: journal.ErrNoKey},
		{name: "no source", key: "k", from: "", to: "b", amount: 1, wantIs: journal.ErrBadAccount},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, err := journal.Transfer(tt.key, tt.from, tt.to, tt.amount)
			if err == nil {
				t.Fatalf("Transfer = %v, want an error", e)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Transfer = %v, want errors.Is %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Transfer = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// Ensure that an entry survives a JSON round trip, negative lines included,
// and that its amounts are strings.
func TestEntry_JSON(t *testing.T) {
	e := journal.Entry{Key: "settle:r4", Lines: lines("bob -0.035, holon 0.0035, lena 0.026775, acme 0.004725")}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"key":"settle:r4","lines":[{"account":"bob","amount":"-0.035"},{"account":"holon","amount":"0.0035"},` +
		`{"account":"lena","amount":"0.026775"},{"account":"acme","amount":"0.004725"}]}`
	if string(b) != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", b, want)
	}
	var got journal.Entry
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip = %v, want %v", got, e)
	}

	for _, in := range []string{
		`{"account":"bob","amount":-0.035}`,
		`{"account":"bob","amount":"--0.035"}`,
		`{"account":"bob","amount":"+0.035"}`,
		`{"account":"bob"}`,
	} {
		var l journal.Line
		if err := json.Unmarshal([]byte(in), &l); err == nil {
			t.Errorf("Unmarshal(%s) = %v, want an error", in, l)
		}
	}
}
