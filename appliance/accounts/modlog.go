package accounts

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"

	"holon.dev/holon"
)

// LogPage is a page of GET /v0/admin/log.
type LogPage struct {
	Entries []LogEntry `json:"entries"`
	Next    string     `json:"next"`
}

// modLogKey is the key of the entry of seq: 8 bytes, big-endian, so
// that keys sort as their seqs do.
func modLogKey(seq uint64) string { return string(binary.BigEndian.AppendUint64(nil, seq)) }

// modLogRange reads the entries with from < seq < to (to 0: no bound),
// oldest first, at most limit+1 of them when limit > 0.
func modLogRange(tx holon.Tx, from, to uint64, limit int) ([]LogEntry, error) {
	var out []LogEntry
	after := ""
	if from > 0 {
		after = modLogKey(from)
	}
	err := tx.ForEachAfter(holon.BucketModLog, "", after, func(k string, raw json.RawMessage) (bool, error) {
		seq := binary.BigEndian.Uint64([]byte(k))
		if to > 0 && seq >= to || limit > 0 && len(out) > limit {
			return false, nil
		}
		var e LogEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return false, err
		}
		e.Seq = seq
		out = append(out, e)
		return true, nil
	})
	return out, err
}

// modLogAfter is the page of entries after seq after, oldest first.
func modLogAfter(tx holon.Tx, after uint64, limit int) (LogPage, error) {
	out, err := modLogRange(tx, after, 0, limit)
	page := LogPage{Entries: out}
	if len(out) > limit {
		page.Entries = out[:limit]
		page.Next = strconv.FormatUint(out[limit-1].Seq, 10)
	}
	if page.Entries == nil {
		page.Entries = []LogEntry{}
	}
	return page, err
}

// modLogNewer reports whether the log has an entry after seq.
func modLogNewer(tx holon.Tx, seq uint64) (bool, error) {
	found := false
	err := tx.ForEachAfter(holon.BucketModLog, "", modLogKey(seq), func(string, json.RawMessage) (bool, error) {
		found = true
		return false, nil
	})
	return found, err
}

// modLogLast is the seq of the newest entry (0: none), found by bisection
// on "has an entry after seq", one seek a probe: the log is never read
// whole, however long it is.
func modLogLast(tx holon.Tx) (uint64, error) {
	lo, hi := uint64(0), uint64(1) // the last seq is in [lo, hi] once none is after hi
	for {
		newer, err := modLogNewer(tx, hi)
		if err != nil {
			return 0, err
		}
		if !newer {
			break
		}
		lo, hi = hi, hi*2
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		newer, err := modLogNewer(tx, mid)
		if err != nil {
			return 0, err
		}
		if newer {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// modLogBefore is the page of entries before seq before (0: the newest),
// newest first. It reads back from the end a window at a time, so a page
// costs its own entries however long the log is.
func modLogBefore(tx holon.Tx, before uint64, limit int) (LogPage, error) {
	if before == 0 {
		last, err := modLogLast(tx)
		if err != nil {
			return LogPage{}, err
		}
		before = last + 1
	}
	var out []LogEntry
	from := uint64(0)
	for window := uint64(limit); ; window *= 2 {
		from = 0
		if before > window+1 {
			from = before - 1 - window
		}
		var err error
		if out, err = modLogRange(tx, from, before, 0); err != nil {
			return LogPage{}, err
		}
		if len(out) >= limit || from == 0 {
			break
		}
	}
	more := from > 0 || len(out) > limit
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	slices.Reverse(out)
	page := LogPage{Entries: out}
	if page.Entries == nil {
		page.Entries = []LogEntry{}
	}
	if more && len(out) > 0 {
		page.Next = strconv.FormatUint(out[len(out)-1].Seq, 10)
	}
	return page, nil
}
