package agents

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"holon.dev/holon/gateway"
)

// holon-labs/csv-profile: agents/csv-profile/holon.yaml.
//
// How a cell is read, decided once for every column:
//   - a cell is null when it is empty or only white space. "NULL", "null",
//     "NA" and the like are values: RFC 4180 has no null literal, and "NA" is
//     also Namibia's country code;
//   - types are read with the surrounding white space ignored (" 42 " is the
//     integer 42): integer is an optional sign and decimal digits that fit in
//     64 bits; number is a plain decimal with an optional exponent ("1.5",
//     ".5", "-2e3"; never "NaN", "Inf" or hexadecimal); boolean is true or
//     false in any case;
//   - a column's type is the narrowest that fits every non-null cell:
//     integer, then number, then boolean, else string; empty when it has no
//     non-null cell;
//   - min and max are numbers for integer and number columns (integers
//     exact; a number column is read as float64), false/true for boolean
//     columns (false sorts first), the cells as written, in byte order, for
//     string columns, and null for empty columns;
//   - distinct counts values, not spellings, in typed columns ("1", "01" and
//     "+1" are one integer; "1" and "1.0" one number; "TRUE" and "true" one
//     boolean), and the cells as written in string columns.
//
// A UTF-8 byte order mark before the header is dropped.

// maxCSVChars is the limit interface.input puts on csv (JSON Schema's
// maxLength counts characters); the handler checks it again for a caller that
// reaches it without the gateway's validation.
const maxCSVChars = 1_000_000

// Column types of the profile.
const (
	typeInteger = "integer"
	typeNumber  = "number"
	typeBoolean = "boolean"
	typeString  = "string"
	typeEmpty   = "empty"
)

type csvProfileInput struct {
	CSV  string `json:"csv,omitempty"`
	File string `json:"file,omitempty"`
}

type csvProfileOutput struct {
	Rows    int             `json:"rows"`
	Columns []columnProfile `json:"columns"`
}

type columnProfile struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Count    int    `json:"count"`
	Nulls    int    `json:"nulls"`
	Min      any    `json:"min"`
	Max      any    `json:"max"`
	Distinct int    `json:"distinct"`
}

func csvProfile(ctx context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
	var in csvProfileInput
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("read input: %w", err)
	}
	if in.File != "" {
		text, err := documentText(ctx, c, in.File)
		if err != nil {
			return nil, err
		}
		in.CSV = text
	}
	if n := utf8.RuneCountInString(in.CSV); n > maxCSVChars {
		return nil, c.Error("too_large", fmt.Sprintf("the CSV has %d characters, at most %d", n, maxCSVChars))
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(in.CSV, "\uFEFF")))
	r.ReuseRecord = true
	header, err := r.Read()
	switch {
	case err == io.EOF:
		return nil, c.Error("empty_input", "the CSV has no header row")
	case err != nil:
		return nil, csvError(c, err)
	}
	cols := make([]columnStats, len(header))
	out := csvProfileOutput{Columns: make([]columnProfile, len(header))}
	for i, name := range header {
		cols[i] = newColumnStats()
		out.Columns[i].Name = name
	}
	for {
		record, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(c, err)
		}
		out.Rows++
		if out.Rows%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		for i, cell := range record {
			cols[i].add(cell)
		}
	}
	for i := range cols {
		cols[i].profile(&out.Columns[i])
	}
	return out, nil
}

// csvError turns a parse error (a ragged row, a stray quote) into
// malformed_csv; encoding/csv names the line.
func csvError(c *gateway.Ctx, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return c.Error("malformed_csv", err.Error())
	}
	return fmt.Errorf("read csv: %w", err)
}

// columnStats follows every type a column can still have, in one pass: a
// type's statistics are kept only while all the column's cells fit it.
type columnStats struct {
	count, nulls int

	isInt, isNum, isBool bool
	intMin, intMax       int64
	ints                 map[int64]struct{}
	numMin, numMax       float64
	nums                 map[float64]struct{}
	sawTrue, sawFalse    bool
	strMin, strMax       string
	strs                 map[string]struct{}
}

func newColumnStats() columnStats {
	return columnStats{
		isInt: true, isNum: true, isBool: true,
		ints: map[int64]struct{}{},
		nums: map[float64]struct{}{},
		strs: map[string]struct{}{},
	}
}

// numberRE is a plain decimal number: no NaN, Inf, hexadecimal or
// underscores, which strconv.ParseFloat would also take.
var numberRE = regexp.MustCompile(`^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$`)

func (s *columnStats) add(cell string) {
	v := strings.TrimSpace(cell)
	if v == "" {
		s.nulls++
		return
	}
	first := s.count == 0
	s.count++

	if first || cell < s.strMin {
		s.strMin = cell
	}
	if first || cell > s.strMax {
		s.strMax = cell
	}
	s.strs[cell] = struct{}{}

	if s.isInt {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil {
			s.isInt, s.ints = false, nil
		} else {
			if first || n < s.intMin {
				s.intMin = n
			}
			if first || n > s.intMax {
				s.intMax = n
			}
			s.ints[n] = struct{}{}
		}
	}
	if s.isNum {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !numberRE.MatchString(v) {
			s.isNum, s.nums = false, nil
		} else {
			if first || f < s.numMin {
				s.numMin = f
			}
			if first || f > s.numMax {
				s.numMax = f
			}
			s.nums[f] = struct{}{}
		}
	}
	if s.isBool {
		switch {
		case strings.EqualFold(v, "true"):
			s.sawTrue = true
		case strings.EqualFold(v, "false"):
			s.sawFalse = true
		default:
			s.isBool = false
		}
	}
}

// profile fills in everything but the column's name.
func (s *columnStats) profile(p *columnProfile) {
	p.Count, p.Nulls = s.count, s.nulls
	switch {
	case s.count == 0:
		p.Type = typeEmpty
	case s.isInt:
		p.Type, p.Min, p.Max, p.Distinct = typeInteger, s.intMin, s.intMax, len(s.ints)
	case s.isNum:
		p.Type, p.Min, p.Max, p.Distinct = typeNumber, s.numMin, s.numMax, len(s.nums)
	case s.isBool:
		p.Type, p.Min, p.Max = typeBoolean, !s.sawFalse, s.sawTrue
		if s.sawTrue {
			p.Distinct++
		}
		if s.sawFalse {
			p.Distinct++
		}
	default:
		p.Type, p.Min, p.Max, p.Distinct = typeString, s.strMin, s.strMax, len(s.strs)
	}
}
