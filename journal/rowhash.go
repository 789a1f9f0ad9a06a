package journal

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// RowHash is the hash of a journal row: SHA-256 over the previous hash and
// the row's key, time and lines, in a fixed encoding.
func RowHash(prev string, seq uint64, key string, t time.Time, lines []Line) string {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seq)
	h.Write([]byte(prev))
	h.Write(n[:])
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(t.UTC().Format(time.RFC3339Nano)))
	h.Write([]byte{0})
	for _, l := range lines {
		h.Write([]byte(l.Account))
		h.Write([]byte{0})
		binary.BigEndian.PutUint64(n[:], uint64(l.Amount))
		h.Write(n[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}
