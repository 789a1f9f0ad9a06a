package pg

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Numbers. Receipts, approvals, journal entries, call events and the
// documents appended to a bucket are numbered from the bucket's sequence
// (the sequences table). A writer hands out numbers from blocks it takes
// from the sequence, each in a short transaction of its own, outside its
// groups: no group writes a sequence, so no two gateways' groups wait on
// each other for a number, and their turns can overlap without a
// conflict on it. A block is taken ahead, while the one in use still has
// half its numbers left; its size follows how fast the writer uses the
// bucket (numbersMin to Options.NumberBlock). A block hands out numbers
// for at most Options.NumberAge after it was taken (Store.NumberSkew):
// no number is handed out much later than a number above it, so that
// receipts, numbered in the order calls start to within that, can be
// searched by time. A block taken right after the one before it (no
// other writer took numbers in between) extends it, its numbers as fresh
// as the new block's: a busy writer uses few blocks, and a writer alone
// loses no number to a block that aged.
//
// The numbers of updates that do not stand (an update that failed, a run
// dropped or run again) are given back (rewind), and a store that closes
// gives back the rest of its blocks when no other writer took numbers
// after them (giveBack), so a gateway alone on its database numbers
// without a gap, except where it died or its database failed. Several
// gateways leave gaps: a bucket's
// numbers increase, and its rows are in the order their numbers were
// handed out in within a gateway, not across gateways. The journal's
// hash chains, not its numbers, show that no row is missing
// (holon.Chains). A gateway's entries take increasing numbers, so each
// chain's rows are in the order of their numbers; a writer whose chain
// another writer extended too (lease.go) leaves its block of the
// journal's numbers when it learns of it (catchUp), so that its next
// entries are numbered after the other's.
//
// A block's transaction commits as every transaction does (durably): a
// number is never handed out twice, even across a crash of the database.
// A sequence never goes back (migration 21 refuses it) but where a store
// gives back the end of its last block, the sequence's newest numbers.

// numbersMin is the smallest block a writer takes.
const numbersMin = 4

// DefaultNumberBlock and DefaultNumberAge are Options.NumberBlock's and
// Options.NumberAge's defaults.
const (
	DefaultNumberBlock = 1024
	DefaultNumberAge   = 250 * time.Millisecond
)

// span is a block of numbers: next to end, inclusive (next > end: used
// up), size numbers from its first, taken at at; id names it while it
// grows (numbers.install).
type span struct {
	next, end, size uint64
	at              time.Time
	id              uint64
}

func (p span) left() uint64 {
	if p.size == 0 || p.next > p.end {
		return 0
	}
	return p.end - p.next + 1
}

// first is the block's first number.
func (p span) first() uint64 { return p.end - p.size + 1 }

// bucketNumbers are a bucket's blocks: the one in use, and the one taken
// ahead.
type bucketNumbers struct {
	cur, ahead span
	// size is the next block's; taking, while a take ahead is in flight,
	// is closed when it ends; epoch counts how often the blocks were left
	// (drop): a take ahead begun before is not used. top is the last
	// number of the newest block taken: a writer's numbers only increase.
	size   uint64
	taking chan struct{}
	epoch  int
	top    uint64
}

// numbers hands out a writer's numbers. Its methods are safe to call at
// once (a take ahead ends on its own goroutine).
type numbers struct {
	s        *Store
	max      uint64
	age      time.Duration
	mu       sync.Mutex
	b        map[string]*bucketNumbers
	taken    uint64 // blocks taken
	ids      uint64 // spans named
	stop     chan struct{}
	inFlight sync.WaitGroup
	// handed counts the numbers handed out; the last of them are in
	// ring (handed-1 at (handed-1) % len), for rewind.
	handed uint64
	ring   [numbersKept]handout
}

// handout is a number handed out, from block p.
type handout struct {
	bucket string
	v      uint64
	p      span
}

// numbersKept is how many of the last numbers handed out can be given
// back (rewind): more than a group's updates hand out.
const numbersKept = 4096

func newNumbers(s *Store, o Options) *numbers {
	n := &numbers{s: s, max: uint64(o.NumberBlock), age: o.NumberAge, b: map[string]*bucketNumbers{}, stop: make(chan struct{})}
	if n.max < numbersMin {
		n.max = DefaultNumberBlock
	}
	if n.age <= 0 {
		n.age = DefaultNumberAge
	}
	return n
}

// usable reports whether p still has a number to hand out at now.
func (n *numbers) usable(p span, now time.Time) bool {
	return p.left() > 0 && now.Sub(p.at) < n.age
}

// get is bucket's blocks (the caller holds mu).
func (n *numbers) get(bucket string) *bucketNumbers {
	b := n.b[bucket]
	if b == nil {
		b = &bucketNumbers{size: numbersMin}
		n.b[bucket] = b
	}
	return b
}

// hand hands out b's next number (the caller holds mu).
func (n *numbers) hand(bucket string, b *bucketNumbers) uint64 {
	v := b.cur.next
	b.cur.next++
	n.ring[n.handed%numbersKept] = handout{bucket: bucket, v: v, p: b.cur}
	n.handed++
	return v
}

// next hands out bucket's next number from the blocks held, or returns
// false when none is usable (the caller takes a block: take). It takes
// the next block ahead when the one in use is half used.
func (n *numbers) next(bucket string) (uint64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	b := n.get(bucket)
	now := time.Now()
	if !n.usable(b.cur, now) {
		if !n.usable(b.ahead, now) {
			// The block in use stays, for rewind and install.
			return 0, false
		}
		b.cur, b.ahead = b.ahead, span{}
	}
	v := n.hand(bucket, b)
	if b.taking == nil && b.ahead.left() == 0 && b.cur.left() <= b.size/2 {
		b.taking = make(chan struct{})
		n.inFlight.Add(1)
		go n.takeAhead(bucket, b, b.size, b.epoch)
	}
	return v, true
}

// resize sets the size of b's next block when a caller must wait for
// one (take), from why b.cur, the block in use, has no number for it:
// doubled when it was used up (the writer numbers faster than its blocks
// come), halved when it aged with more than half a block unused (slower
// than they age).
func (n *numbers) resize(b *bucketNumbers) {
	switch left := b.cur.left(); {
	case left == 0:
		b.size = min(2*b.size, n.max)
	case 2*left > b.size:
		b.size = max(b.size/2, numbersMin)
	}
}

// take hands out bucket's next number when next has none: from the
// block a take ahead in flight brings, once it comes, else from a block
// taken now.
func (n *numbers) take(ctx context.Context, bucket string) (uint64, error) {
	n.mu.Lock()
	n.resize(n.get(bucket))
	n.mu.Unlock()
	for {
		n.mu.Lock()
		b := n.get(bucket)
		if w := b.taking; w != nil {
			n.mu.Unlock()
			select {
			case <-w:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			if v, ok := n.next(bucket); ok {
				return v, nil
			}
			continue
		}
		size := b.size
		n.mu.Unlock()
		p, err := n.takeBlock(ctx, bucket, size)
		if err != nil {
			return 0, err
		}
		n.mu.Lock()
		// An aged block taken ahead, untouched, goes on in p when p
		// follows it. (Only the writer takes and drops: no drop came
		// in between.)
		if b.ahead.left() > 0 && b.ahead.end+1 == p.first() {
			p.next, p.size = b.ahead.next, p.size+b.ahead.size
		}
		b.ahead = span{}
		n.install(b, p, true)
		v := n.hand(bucket, b)
		n.mu.Unlock()
		return v, nil
	}
}

// install makes p, a block just taken, b's next: it extends the block in
// use when it follows it (no other writer took numbers in between: the
// rest of that block is as fresh as p), else it is the one in use (now)
// or taken ahead. The caller holds mu.
func (n *numbers) install(b *bucketNumbers, p span, now bool) {
	b.top = max(b.top, p.end)
	if b.cur.size > 0 && b.cur.end+1 == p.next {
		b.cur.end, b.cur.size, b.cur.at = p.end, b.cur.size+p.size, p.at
		return
	}
	n.ids++
	p.id = n.ids
	if now {
		b.cur = p
	} else {
		b.ahead = p
	}
}

// takeAhead takes b's next block, to use once the one in use is done.
// A block that comes once the blocks were left (drop) is skipped.
func (n *numbers) takeAhead(bucket string, b *bucketNumbers, size uint64, epoch int) {
	defer n.inFlight.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	p, err := n.takeBlock(ctx, bucket, size)
	n.mu.Lock()
	defer n.mu.Unlock()
	close(b.taking)
	b.taking = nil
	if err == nil && b.epoch == epoch && p.next > b.top {
		n.install(b, p, false)
	}
}

// mark is where rewind gives numbers back to.
func (n *numbers) mark() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.handed
}

// rewind gives back the numbers handed out since mark, the last first,
// as long as each is the last its block handed out: the updates that
// took them did not stand, and run again (or fail) with no number of
// theirs written. A number that cannot be given back (its block was left
// meanwhile, and the next one used) is skipped.
func (n *numbers) rewind(mark uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for n.handed > mark && n.handed-mark <= numbersKept {
		n.handed--
		h := n.ring[n.handed%numbersKept]
		b := n.b[h.bucket]
		switch {
		case b == nil:
		case b.cur.id == h.p.id && b.cur.next == h.v+1:
			b.cur.next = h.v
		case b.cur.size > 0 && b.cur.next == b.cur.first() && b.ahead.left() == 0 && h.p.end < b.cur.next && h.p.id != b.cur.id:
			// The block before the one in use, which is untouched:
			// back to it, the one in use as the one taken ahead.
			b.cur, b.ahead = h.p, b.cur
			b.cur.next = h.v
		}
	}
}

// drop leaves bucket's blocks: its next number comes from a block taken
// after now.
func (n *numbers) drop(bucket string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if b := n.b[bucket]; b != nil {
		b.cur, b.ahead = span{}, span{}
		b.epoch++
	}
}

// close waits for the takes ahead in flight (stopping them after
// closeWait), then gives back what is left of each bucket's blocks where
// no other writer took numbers after them: the sequence goes back to the
// last number handed out, and the next writer to number goes on from
// there. A take stopped may have taken its block all the same (the
// database committed it before the stop reached it): then the sequence
// no longer ends at this writer's blocks, and nothing is given back.
func (n *numbers) close(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		n.inFlight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
	n.stopTakes()
	n.mu.Lock()
	defer n.mu.Unlock()
	for bucket, b := range n.b {
		end, from := b.cur.end, b.cur.next
		if b.ahead.left() > 0 {
			end, from = b.ahead.end, b.ahead.next
			if b.cur.size > 0 && b.cur.end+1 == b.ahead.next {
				from = b.cur.next
			}
		} else if b.cur.left() == 0 {
			continue
		}
		n.giveBack(ctx, bucket, from, end)
	}
}

// closeWait is how long a closing store waits for its takes ahead in
// flight before it stops them.
const closeWait = 2 * time.Second

// stopTakes stops the takes ahead in flight and waits for them (a store
// killed gives nothing back: its blocks are gaps, as a dead gateway's).
func (n *numbers) stopTakes() {
	close(n.stop)
	n.inFlight.Wait()
}

// takeBlock takes size numbers of bucket's sequence, in a transaction of
// its own: the last size numbers up to the value it leaves.
func (n *numbers) takeBlock(ctx context.Context, bucket string, size uint64) (span, error) {
	var last int64
	err := n.s.pool.QueryRow(ctx, `INSERT INTO sequences AS s (bucket, value) VALUES ($1, $2)
		ON CONFLICT (bucket) DO UPDATE SET value = s.value + EXCLUDED.value RETURNING value::bigint`, bucket, int64(size)).Scan(&last)
	if err != nil {
		return span{}, err
	}
	n.mu.Lock()
	n.taken++
	n.mu.Unlock()
	return span{next: uint64(last) - size + 1, end: uint64(last), size: size, at: time.Now()}, nil
}

// giveBack moves bucket's sequence back to from-1 if it still ends at
// end (the end of this writer's last block): migration 21 lets a
// transaction that says so (holon.give_back) move it back.
func (n *numbers) giveBack(ctx context.Context, bucket string, from, end uint64) {
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SET LOCAL holon.give_back = 'on'`)
	b.Queue(`UPDATE sequences SET value = $2 WHERE bucket = $1 AND value = $3`, bucket, int64(from-1), int64(end))
	b.Queue(`COMMIT`)
	n.s.pool.SendBatch(ctx, b).Close()
}

// NumberSkew is how much later than a number above it a receipt's,
// approval's, journal entry's or call event's number may be handed out
// (holon.NumberSkew): the age of a block of numbers.
func (s *Store) NumberSkew() time.Duration { return s.nums.age }
