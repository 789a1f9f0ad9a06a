package backup

import (
	"errors"
	"fmt"
	"io"
	"os"

	"holon.dev/holon/kv"
)

// Restore loads a backup into a new store at path, counters and sequences
// included. The target must be missing or an empty store. The rows go into
// a temporary file in transactions of a bounded size (memory stays flat),
// which replaces the target only once the whole file checked out (header,
// rows, counts, checksum): a truncated, corrupted or unknown-version
// backup, or a non-empty target, leaves the target as it was and no file
// behind. progress, when set, gets the rows read and the total.
func Restore(r io.Reader, path string, progress func(done, total int64)) (Summary, error) {
	cr := &countReader{r: r}
	rd, err := NewReader(cr)
	if err != nil {
		return Summary{}, err
	}
	hd := rd.Header()
	if hd.Schema != kv.SchemaVersion {
		return Summary{Header: hd}, fmt.Errorf("the backup holds a store of schema %d, this gateway reads schema %d", hd.Schema, kv.SchemaVersion)
	}
	next := func() (kv.Row, error) {
		row, err := rd.Next()
		if progress != nil && (err != nil || rd.Rows()%progressEvery == 0) {
			progress(rd.Rows(), hd.Rows)
		}
		return row, err
	}
	snap := rd.Snapshot()
	if st, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil && fi.Mode().IsRegular() {
			snap.SizeHint = fi.Size()
		}
	}
	if err := kv.Restore(path, snap, next); err != nil {
		return Summary{Header: hd}, err
	}
	t, ok := rd.Trailer()
	if !ok {
		return Summary{Header: hd}, errors.New("restore ended before the trailer was checked")
	}
	return Summary{Header: hd, Trailer: t, Bytes: cr.n}, nil
}
