// Package backup copies a Holon store out and back in: a JSONL dump of one
// consistent moment taken while the gateway serves, an all-or-nothing
// restore into a new or empty store, an offline integrity check, and the
// PostgreSQL schema and loader that are the way out of the host.
//
// # The format
//
// A backup is UTF-8 JSON Lines. The first line is the header:
//
//	{"format":"holon-backup","version":1,"gateway":"0.1.0","schema":1,
//	 "time":"2026-10-01T09:00:00Z","rows":1234,
//	 "tables":{"accounts":{"rows":4,"sequence":0},"receipts":{"rows":9,"sequence":9},…}}
//
// tables lists every bucket of the store with its row count and its
// sequence (the last id handed out: receipts r1…, approvals a1…, journal
// rows). left_out names the tables a backup leaves out by design, and why
// (LeftOut: uploaded files, which live 24 hours); they count 0 rows, and
// readers (Restore, Check, the PostgreSQL loader) refuse a backup that
// carries rows of one. Then one line per row, bucket by bucket in name order and key by
// key in byte order:
//
//	{"t":"accounts","k":"alice","v":{"balance":"4.808","held":"0.00"}}
//	{"t":"receipts","kn":2,"v":{"id":"r2",…}}
//	{"t":"counters","k":"receipts","vn":9}
//
// The key is "k" (a string) when it is printable UTF-8, else "kn" (an
// unsigned integer) when it is 8 bytes (the big-endian sequence keys), else
// "kb" (base64). The value is "v" (the stored JSON document, verbatim) when
// it is one, else "vn" for 8 bytes (counters), "vs" for printable text, or
// "vb" (base64). Amounts inside documents are decimal strings, as stored.
// The last line is the trailer:
//
//	{"end":{"rows":1234,"sha256":"<hex of SHA-256 over every byte before this line>"}}
//
// A file without its trailer is truncated; a file whose bytes do not hash
// to the trailer's checksum, or whose counts differ from its header, is
// corrupted. Readers refuse both, and refuse a version they do not know.
package backup

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"time"
	"unicode/utf8"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// Format is the header's "format" value.
const Format = "holon-backup"

// Version is the format version this code writes and reads.
const Version = 1

// Header is a backup's first line.
type Header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Gateway is the version of the gateway that wrote the backup.
	Gateway string `json:"gateway"`
	// Schema is the store's layout version.
	Schema uint64    `json:"schema"`
	Time   time.Time `json:"time"`
	// Rows is the number of row lines.
	Rows   int64            `json:"rows"`
	Tables map[string]Table `json:"tables"`
	// LeftOut names the tables a backup does not carry, by design, and
	// why (LeftOut); their rows count 0 in Tables.
	LeftOut map[string]string `json:"left_out,omitempty"`
}

// LeftOut are the store's tables a backup leaves out, and why. Readers
// agree: they refuse a backup that carries rows of one.
var LeftOut = map[string]string{
	holon.BucketFiles: "uploaded files are deleted 24 hours after their upload; a backup, kept far longer, carries neither their bytes nor their records, and a restored gateway starts with no files",
}

// Table is one bucket's count and sequence in a header.
type Table struct {
	Rows     int64  `json:"rows"`
	Sequence uint64 `json:"sequence"`
}

// Trailer is a backup's last line.
type Trailer struct {
	Rows   int64  `json:"rows"`
	SHA256 string `json:"sha256"`
}

// Options tune a backup.
type Options struct {
	// Gateway is written in the header as the gateway's version.
	Gateway string
	// Now is the clock for the header's time (time.Now when nil).
	Now func() time.Time
	// Progress, when set, is called every few thousand rows and at the
	// end with the rows written so far and the total.
	Progress func(done, total int64)
	// Background paces a backup taken while the gateway serves: it rests
	// as long as it worked, so that it takes at most half of a core from
	// the calls (and twice as long).
	Background bool
}

// Summary describes a backup written or read.
type Summary struct {
	Header  Header
	Trailer Trailer
	// Bytes is the size of the file.
	Bytes int64
}

// progressEvery is how many rows pass between progress calls.
const progressEvery = 4096

// yieldEvery is how many rows a backup encodes between yields. A backup is
// background work: every so often it lets the goroutines serving calls
// (the store's one writer first of all) run before it goes on, so that on
// a small machine it takes the CPU the calls leave idle rather than a core
// of its own. Alone, it loses nothing by yielding.
const yieldEvery = 256

// restAfter is how long a background backup works between rests.
const restAfter = 2 * time.Millisecond

// Write streams a backup of s to w from one read transaction. The gateway
// keeps serving meanwhile. On an error the output lacks its trailer, so
// any reader sees it as truncated.
func Write(w io.Writer, s Source, opts Options) (Summary, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	h := sha256.New()
	var sum Summary
	var line []byte
	var done int64
	rested := time.Now()
	emit := func(b []byte) error {
		h.Write(b)
		_, err := bw.Write(b)
		return err
	}
	err := s.Export(func(snap kv.Snapshot) error {
		hd := Header{Format: Format, Version: Version, Gateway: opts.Gateway, Schema: snap.Schema,
			Time: now().UTC(), Tables: map[string]Table{}}
		for _, b := range snap.Buckets {
			if why, left := LeftOut[b.Name]; left {
				if hd.LeftOut == nil {
					hd.LeftOut = map[string]string{}
				}
				hd.LeftOut[b.Name] = why
				b.Rows = 0
			}
			hd.Tables[b.Name] = Table{Rows: b.Rows, Sequence: b.Sequence}
			hd.Rows += b.Rows
		}
		sum.Header = hd
		b, err := json.Marshal(hd)
		if err != nil {
			return err
		}
		return emit(append(b, '\n'))
	}, func(bucket string, key, value []byte) error {
		if _, left := LeftOut[bucket]; left {
			return nil
		}
		line = appendRow(line[:0], bucket, key, value)
		if err := emit(line); err != nil {
			return err
		}
		done++
		if opts.Progress != nil && done%progressEvery == 0 {
			opts.Progress(done, sum.Header.Rows)
		}
		if done%yieldEvery == 0 {
			if worked := time.Since(rested); opts.Background && worked >= restAfter {
				time.Sleep(worked)
				rested = time.Now()
			} else {
				runtime.Gosched()
			}
		}
		return nil
	})
	if err != nil {
		return sum, fmt.Errorf("backup: %w", err)
	}
	if done != sum.Header.Rows {
		return sum, fmt.Errorf("backup: the header announced %d rows, %d were read", sum.Header.Rows, done)
	}
	sum.Trailer = Trailer{Rows: done, SHA256: hex.EncodeToString(h.Sum(nil))}
	b, err := json.Marshal(struct {
		End Trailer `json:"end"`
	}{sum.Trailer})
	if err != nil {
		return sum, err
	}
	if _, err := bw.Write(append(b, '\n')); err != nil {
		return sum, fmt.Errorf("backup: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return sum, fmt.Errorf("backup: %w", err)
	}
	if opts.Progress != nil {
		opts.Progress(done, sum.Header.Rows)
	}
	sum.Bytes = cw.n
	return sum, nil
}

// appendRow encodes one row line.
func appendRow(b []byte, bucket string, key, value []byte) []byte {
	b = append(b, `{"t":`...)
	b = appendString(b, bucket)
	switch {
	case printable(key):
		b = append(b, `,"k":`...)
		b = appendString(b, string(key))
	case len(key) == 8:
		b = append(b, `,"kn":`...)
		b = strconv.AppendUint(b, binary.BigEndian.Uint64(key), 10)
	default:
		b = append(b, `,"kb":"`...)
		b = base64.StdEncoding.AppendEncode(b, key)
		b = append(b, '"')
	}
	switch {
	case isDocument(value):
		b = append(b, `,"v":`...)
		b = append(b, value...)
	case len(value) == 8:
		b = append(b, `,"vn":`...)
		b = strconv.AppendUint(b, binary.BigEndian.Uint64(value), 10)
	case printable(value):
		b = append(b, `,"vs":`...)
		b = appendString(b, string(value))
	default:
		b = append(b, `,"vb":"`...)
		b = base64.StdEncoding.AppendEncode(b, value)
		b = append(b, '"')
	}
	return append(b, '}', '\n')
}

// printable reports whether b is UTF-8 text without control characters,
// so that it reads well as a JSON string and comes back byte for byte.
func printable(b []byte) bool {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return false
		}
		i += n
	}
	return true
}

// isDocument reports whether v is a JSON object or array written on one
// line, which the backup embeds verbatim.
func isDocument(v []byte) bool {
	if len(v) < 2 || (v[0] != '{' && v[0] != '[') || (v[len(v)-1] != '}' && v[len(v)-1] != ']') {
		return false
	}
	for _, c := range v {
		if c == '\n' || c == '\r' {
			return false
		}
	}
	return json.Valid(v)
}

// appendString appends s as a JSON string; s is printable text, so only
// quotes and backslashes need escaping.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b = append(b, '\\', c)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
