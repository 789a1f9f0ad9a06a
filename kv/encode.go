package kv

import (
	"encoding/json"

	"holon.dev/holon"
)

// encodeValue appends v's JSON encoding to dst: by hand for the hot records
// (their AppendJSON: the bytes json.Marshal writes), by encoding/json for
// anything else (and a rollup row's key and value as they are stored,
// rollups.go).
// jsonAppender is a value of another package that encodes itself as
// json.Marshal does (an idempotency key's log entry, written by every
// settlement of a call that carried one).
type jsonAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

func encodeValue(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case *holon.Receipt:
		return v.AppendJSON(dst)
	case *holon.Hold:
		return v.AppendJSON(dst)
	case holon.Account:
		return v.AppendJSON(dst), nil
	case holon.Budget:
		return v.AppendJSON(dst), nil
	case holon.Record:
		return v.AppendJSON(dst), nil
	case *holon.Event:
		return v.AppendJSON(dst)
	case *holon.JournalRow:
		return v.AppendJSON(dst)
	case rollupValue: // not JSON: a rollup row's own encoding
		return appendRollupRow(dst, rollupRow(v)), nil
	case rollupRowKey:
		return append(dst, v...), nil
	case jsonAppender:
		return v.AppendJSON(dst)
	}
	b, err := json.Marshal(v)
	return append(dst, b...), err
}
