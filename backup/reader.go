package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"

	"holon.dev/holon/kv"
)

// Errors a reader returns, to test with errors.Is.
var (
	// ErrNotBackup: the input does not start with a Holon backup header.
	ErrNotBackup = errors.New("not a Holon backup")
	// ErrVersion: the backup's format version is not one this code reads.
	ErrVersion = errors.New("unknown backup format version")
	// ErrTruncated: the input ends before the trailer.
	ErrTruncated = errors.New("backup is truncated")
	// ErrCorrupt: a line does not decode, counts differ, or the checksum
	// does not match.
	ErrCorrupt = errors.New("backup is corrupted")
)

// maxLine bounds one line (a row's document), so that a damaged file
// cannot make a reader allocate without limit.
const maxLine = 256 << 20

// Reader reads a backup row by row, checking it as it goes. Next returns
// io.EOF only after the trailer has been read and checked: a caller that
// acts on rows must not commit before that.
type Reader struct {
	br     *bufio.Reader
	h      hash.Hash
	header Header
	line   int64
	rows   int64
	tables map[string]int64
	// order checks that each table's rows come together and in key order.
	table   string
	lastKey []byte
	trailer *Trailer
	buf     []byte
}

// NewReader reads and checks the header.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, 1<<20), h: sha256.New(), tables: map[string]int64{}}
	line, err := rd.readLine()
	if errors.Is(err, io.EOF) && len(line) == 0 {
		return nil, fmt.Errorf("%w: the input is empty", ErrNotBackup)
	}
	if err != nil && !errors.Is(err, ErrTruncated) {
		return nil, err
	}
	var probe struct {
		Format  string          `json:"format"`
		Version json.RawMessage `json:"version"`
	}
	if json.Unmarshal(line, &probe) != nil || probe.Format != Format {
		return nil, fmt.Errorf("%w: the first line is not a %q header", ErrNotBackup, Format)
	}
	if string(probe.Version) != strconv.Itoa(Version) {
		v := string(probe.Version)
		if v == "" {
			v = "(none)"
		}
		return nil, fmt.Errorf("%w: the file is format version %s, this gateway reads version %d (restore it with the gateway that wrote it, or a newer one)", ErrVersion, v, Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the input ends inside the header", ErrTruncated)
	}
	if err := json.Unmarshal(line, &rd.header); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	var total int64
	for name, t := range rd.header.Tables {
		if name == "" || t.Rows < 0 {
			return nil, fmt.Errorf("%w: header: bad table %q", ErrCorrupt, name)
		}
		total += t.Rows
	}
	if total != rd.header.Rows || rd.header.Rows < 0 {
		return nil, fmt.Errorf("%w: header: tables hold %d rows, the header says %d", ErrCorrupt, total, rd.header.Rows)
	}
	rd.h.Write(line)
	return rd, nil
}

// Header is the backup's header.
func (rd *Reader) Header() Header { return rd.header }

// Snapshot is the header as the store's description of a copy.
func (rd *Reader) Snapshot() kv.Snapshot {
	snap := kv.Snapshot{Schema: rd.header.Schema}
	for name, t := range rd.header.Tables {
		snap.Buckets = append(snap.Buckets, kv.BucketInfo{Name: name, Rows: t.Rows, Sequence: t.Sequence})
	}
	return snap
}

// Line is the number of the last line read (the header is line 1).
func (rd *Reader) Line() int64 { return rd.line }

// Rows is the number of rows read so far.
func (rd *Reader) Rows() int64 { return rd.rows }

// Trailer is the checked trailer, once Next has returned io.EOF.
func (rd *Reader) Trailer() (Trailer, bool) {
	if rd.trailer == nil {
		return Trailer{}, false
	}
	return *rd.trailer, true
}

// readLine returns the next line with its newline. A last line without a
// newline comes back with ErrTruncated; the end of input with io.EOF.
func (rd *Reader) readLine() ([]byte, error) {
	rd.buf = rd.buf[:0]
	for {
		chunk, err := rd.br.ReadSlice('\n')
		if len(rd.buf)+len(chunk) > maxLine {
			return nil, fmt.Errorf("%w: line %d is longer than %d bytes", ErrCorrupt, rd.line+1, maxLine)
		}
		switch {
		case err == nil:
			rd.line++
			if len(rd.buf) == 0 {
				return chunk, nil
			}
			rd.buf = append(rd.buf, chunk...)
			return rd.buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			rd.buf = append(rd.buf, chunk...)
		case errors.Is(err, io.EOF):
			rd.buf = append(rd.buf, chunk...)
			if len(rd.buf) == 0 {
				return nil, io.EOF
			}
			rd.line++
			return rd.buf, ErrTruncated
		default:
			return nil, fmt.Errorf("read backup: %w", err)
		}
	}
}

// rowLine is a row or the trailer, as decoded.
type rowLine struct {
	T  *string         `json:"t"`
	K  *string         `json:"k"`
	KN *uint64         `json:"kn"`
	KB *string         `json:"kb"`
	V  json.RawMessage `json:"v"`
	VN *uint64         `json:"vn"`
	VS *string         `json:"vs"`
	VB *string         `json:"vb"`
	// End is the trailer.
	End *Trailer `json:"end"`
}

// Next returns the next row. After the last row it reads the trailer and
// checks the counts and the checksum: io.EOF means the whole backup is
// intact. The row's slices are valid until the next call.
func (rd *Reader) Next() (kv.Row, error) {
	if rd.trailer != nil {
		return kv.Row{}, io.EOF
	}
	line, err := rd.readLine()
	if errors.Is(err, io.EOF) || errors.Is(err, ErrTruncated) {
		return kv.Row{}, fmt.Errorf("%w: it ends after line %d (%d of %d rows) without its trailer: the copy is incomplete", ErrTruncated, rd.line, rd.rows, rd.header.Rows)
	}
	if err != nil {
		return kv.Row{}, err
	}
	if r, ok := rd.fastRow(line); ok {
		rd.h.Write(line)
		return rd.place(r)
	}
	var l rowLine
	if err := json.Unmarshal(line, &l); err != nil {
		return kv.Row{}, rd.corrupt("not a JSON row: %v", err)
	}
	if l.End != nil {
		return kv.Row{}, rd.finish(l)
	}
	rd.h.Write(line)
	r, err := rd.decodeRow(l)
	if err != nil {
		return kv.Row{}, err
	}
	return rd.place(r)
}

func (rd *Reader) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrCorrupt, rd.line, fmt.Sprintf(format, args...))
}

// decodeRow turns a decoded row line into a row.
func (rd *Reader) decodeRow(l rowLine) (kv.Row, error) {
	if l.T == nil {
		return kv.Row{}, rd.corrupt(`a row without "t"`)
	}
	r := kv.Row{Bucket: *l.T}
	keys := 0
	if l.K != nil {
		keys++
		r.Key = []byte(*l.K)
	}
	if l.KN != nil {
		keys++
		r.Key = binary.BigEndian.AppendUint64(nil, *l.KN)
	}
	if l.KB != nil {
		keys++
		b, err := base64.StdEncoding.DecodeString(*l.KB)
		if err != nil {
			return kv.Row{}, rd.corrupt("kb: %v", err)
		}
		r.Key = b
	}
	values := 0
	if l.V != nil {
		values++
		r.Value = l.V
	}
	if l.VN != nil {
		values++
		r.Value = binary.BigEndian.AppendUint64(nil, *l.VN)
	}
	if l.VS != nil {
		values++
		r.Value = []byte(*l.VS)
	}
	if l.VB != nil {
		values++
		b, err := base64.StdEncoding.DecodeString(*l.VB)
		if err != nil {
			return kv.Row{}, rd.corrupt("vb: %v", err)
		}
		r.Value = b
	}
	if keys != 1 || values != 1 {
		return kv.Row{}, rd.corrupt("a row needs one key (k, kn or kb) and one value (v, vn, vs or vb)")
	}
	return r, nil
}

// place checks a row's table and order, and counts it.
func (rd *Reader) place(r kv.Row) (kv.Row, error) {
	want, ok := rd.header.Tables[r.Bucket]
	if !ok {
		return kv.Row{}, rd.corrupt("table %q is not in the header", r.Bucket)
	}
	if why, left := LeftOut[r.Bucket]; left {
		return kv.Row{}, rd.corrupt("table %s holds rows, which backups leave out (%s)", r.Bucket, why)
	}
	if len(r.Key) == 0 {
		return kv.Row{}, rd.corrupt("a row with an empty key")
	}
	if r.Bucket != rd.table {
		if rd.tables[r.Bucket] > 0 {
			return kv.Row{}, rd.corrupt("rows of table %s are not together", r.Bucket)
		}
		rd.table, rd.lastKey = r.Bucket, rd.lastKey[:0]
	} else if string(r.Key) <= string(rd.lastKey) {
		return kv.Row{}, rd.corrupt("table %s: a key out of order or repeated", r.Bucket)
	}
	rd.lastKey = append(rd.lastKey[:0], r.Key...)
	rd.tables[r.Bucket]++
	rd.rows++
	if rd.tables[r.Bucket] > want.Rows {
		return kv.Row{}, rd.corrupt("table %s has more rows than the header's %d", r.Bucket, want.Rows)
	}
	return r, nil
}

// finish checks the trailer: the counts, the checksum, and nothing after it.
func (rd *Reader) finish(l rowLine) error {
	if l.T != nil {
		return rd.corrupt("a row and a trailer on one line")
	}
	got := hex.EncodeToString(rd.h.Sum(nil))
	if l.End.SHA256 != got {
		return fmt.Errorf("%w: the checksum of lines 1-%d is %s, the trailer says %s: the file was altered or damaged", ErrCorrupt, rd.line-1, got, l.End.SHA256)
	}
	if l.End.Rows != rd.rows || rd.rows != rd.header.Rows {
		return fmt.Errorf("%w: %d rows read, the header says %d and the trailer %d", ErrCorrupt, rd.rows, rd.header.Rows, l.End.Rows)
	}
	for name, t := range rd.header.Tables {
		if rd.tables[name] != t.Rows {
			return fmt.Errorf("%w: table %s has %d rows, the header says %d", ErrCorrupt, name, rd.tables[name], t.Rows)
		}
	}
	if extra, err := rd.br.Peek(1); len(extra) > 0 || (err != nil && !errors.Is(err, io.EOF)) {
		return fmt.Errorf("%w: data after the trailer on line %d", ErrCorrupt, rd.line)
	}
	rd.trailer = l.End
	return io.EOF
}

// Check reads a whole backup and checks it: the header, every row, the
// counts and the checksum.
func Check(r io.Reader) (Summary, error) {
	cr := &countReader{r: r}
	rd, err := NewReader(cr)
	if err != nil {
		return Summary{}, err
	}
	for {
		if _, err := rd.Next(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return Summary{Header: rd.Header()}, err
		}
	}
	t, _ := rd.Trailer()
	return Summary{Header: rd.Header(), Trailer: t, Bytes: cr.n}, nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// fastRow decodes a row line in the exact form Write produces, without
// reflection: most of a restore's time would otherwise go to
// encoding/json. Anything else (another field order, other escapes,
// spaces, the trailer) returns false, and the line is decoded in full.
func (rd *Reader) fastRow(line []byte) (kv.Row, bool) {
	var r kv.Row
	p, ok := bytes.CutPrefix(line, []byte(`{"t":"`))
	if !ok {
		return r, false
	}
	bucket, p, ok := fastString(p)
	if !ok {
		return r, false
	}
	// Reuse the table's name: it is the same as the last row's, mostly.
	if string(bucket) == rd.table {
		r.Bucket = rd.table
	} else {
		r.Bucket = string(bucket)
	}
	switch {
	case bytes.HasPrefix(p, []byte(`,"k":"`)):
		var k []byte
		if k, p, ok = fastString(p[len(`,"k":"`):]); !ok {
			return r, false
		}
		r.Key = bytes.Clone(k)
	case bytes.HasPrefix(p, []byte(`,"kn":`)):
		var n uint64
		if n, p, ok = fastUint(p[len(`,"kn":`):]); !ok {
			return r, false
		}
		r.Key = binary.BigEndian.AppendUint64(nil, n)
	case bytes.HasPrefix(p, []byte(`,"kb":"`)):
		var k []byte
		if k, p, ok = fastString(p[len(`,"kb":"`):]); !ok {
			return r, false
		}
		var err error
		if r.Key, err = base64.StdEncoding.AppendDecode(nil, k); err != nil {
			return r, false
		}
	default:
		return r, false
	}
	end, ok := bytes.CutSuffix(p, []byte("}\n"))
	if !ok {
		return r, false
	}
	switch {
	case bytes.HasPrefix(end, []byte(`,"v":`)):
		v := end[len(`,"v":`):]
		if !isDocument(v) {
			return r, false
		}
		r.Value = bytes.Clone(v)
	case bytes.HasPrefix(end, []byte(`,"vn":`)):
		n, rest, ok := fastUint(end[len(`,"vn":`):])
		if !ok || len(rest) != 0 {
			return r, false
		}
		r.Value = binary.BigEndian.AppendUint64(nil, n)
	case bytes.HasPrefix(end, []byte(`,"vs":"`)):
		v, rest, ok := fastString(end[len(`,"vs":"`):])
		if !ok || len(rest) != 0 {
			return r, false
		}
		r.Value = bytes.Clone(v)
	case bytes.HasPrefix(end, []byte(`,"vb":"`)):
		v, rest, ok := fastString(end[len(`,"vb":"`):])
		if !ok || len(rest) != 0 {
			return r, false
		}
		var err error
		if r.Value, err = base64.StdEncoding.AppendDecode(nil, v); err != nil {
			return r, false
		}
	default:
		return r, false
	}
	return r, true
}

// fastString reads a JSON string's body up to its closing quote, as
// appendString writes it: printable UTF-8 with only quotes and backslashes
// escaped. It returns the unescaped bytes (which may alias p) and the rest.
func fastString(p []byte) ([]byte, []byte, bool) {
	var out []byte
	start := 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"':
			if out == nil {
				s := p[:i]
				return s, p[i+1:], printable(s)
			}
			out = append(out, p[start:i]...)
			return out, p[i+1:], printable(out)
		case c == '\\':
			if i+1 == len(p) || (p[i+1] != '"' && p[i+1] != '\\') {
				return nil, nil, false
			}
			out = append(out, p[start:i]...)
			out = append(out, p[i+1])
			i++
			start = i + 1
		case c < 0x20:
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// fastUint reads an unsigned decimal without a leading zero.
func fastUint(p []byte) (uint64, []byte, bool) {
	i := 0
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	if i == 0 || (i > 1 && p[0] == '0') {
		return 0, nil, false
	}
	n, err := strconv.ParseUint(string(p[:i]), 10, 64)
	return n, p[i:], err == nil
}
