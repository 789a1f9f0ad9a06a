package pg

import (
	"bytes"
	"sync"
)

// docMemo keeps what a document's bytes last decoded to, for the
// documents every settled call reads and rewrites (a version's latency
// histogram and its earnings): a read whose bytes are the ones kept takes
// a copy of the value instead of parsing the JSON again, in the writer's
// one goroutine, where each microsecond a call costs is one the whole
// group waits for. The value is found only by its exact bytes, so a
// document another gateway changed is parsed as before.
type docMemo struct {
	mu sync.Mutex
	m  map[string]memoDoc
}

type memoDoc struct {
	raw []byte
	v   any
}

// maxMemo bounds the documents kept; past it the memo starts again empty.
const maxMemo = 10_000

// get returns the value kept for key when raw is the bytes it was decoded
// from. The caller copies it before changing it.
func (m *docMemo) get(key string, raw []byte) (any, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.m[key]
	if !ok || !bytes.Equal(d.raw, raw) {
		return nil, false
	}
	return d.v, true
}

// put keeps v as what raw decodes to. v must not be changed afterwards.
func (m *docMemo) put(key string, raw []byte, v any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= maxMemo {
		m.m = make(map[string]memoDoc)
	}
	m.m[key] = memoDoc{raw: bytes.Clone(raw), v: v}
}
