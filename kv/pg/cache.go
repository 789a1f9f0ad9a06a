package pg

// The writer's group cache. While a group's transaction runs, no other
// writer of any gateway can write (they wait for the advisory lock), so a
// value the group read or wrote is still the database's until it commits:
// the sequences, counters and metadata each call moves (the receipt and
// journal sequences, the receipt and entry counters, the journal's head)
// are read once per group instead of once per update. An update's own
// changes are kept apart until its savepoint is released, and dropped
// when it is rolled back.

// cache holds values of the sequences, counters and meta tables.
type cache struct {
	seq  map[string]uint64
	ctr  map[string]uint64
	meta map[string]*string // nil: known absent
}

func newCache() *cache {
	return &cache{seq: map[string]uint64{}, ctr: map[string]uint64{}, meta: map[string]*string{}}
}

// merge adds an update's changes to the group's.
func (c *cache) merge(u *cache) {
	for k, v := range u.seq {
		c.seq[k] = v
	}
	for k, v := range u.ctr {
		c.ctr[k] = v
	}
	for k, v := range u.meta {
		c.meta[k] = v
	}
}

// cachedSeq is a sequence's value this update or its group last saw.
func (t *Tx) cachedSeq(bucket string) (uint64, bool) {
	if t.u == nil {
		return 0, false
	}
	if v, ok := t.u.seq[bucket]; ok {
		return v, true
	}
	v, ok := t.g.seq[bucket]
	return v, ok
}

func (t *Tx) cachedCounter(name string) (uint64, bool) {
	if t.u == nil {
		return 0, false
	}
	if v, ok := t.u.ctr[name]; ok {
		return v, true
	}
	v, ok := t.g.ctr[name]
	return v, ok
}

func (t *Tx) cachedMeta(key string) (*string, bool) {
	if t.u == nil {
		return nil, false
	}
	if v, ok := t.u.meta[key]; ok {
		return v, true
	}
	v, ok := t.g.meta[key]
	return v, ok
}
