package operators

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// count_distinct state, compact and exact.
//
// A distinctAcc interns every distinct value (its canonical key encoding,
// SerializeKey's, so -0 == +0 and NaN == NaN) once in a valueDict: the
// bytes in shared arena chunks, a reference count, and an index entry. A
// slot's set is an idSet of value ids: up to smallSetMax ids in a short
// list, then an open-addressing table of uint32. A (slot, value) pair costs
// 4 to 8 bytes instead of a Go map entry and a string per slot, values
// shared by many slots are stored once, and no per-value object exists for
// the garbage collector to scan. Values are compared byte for byte on
// interning, so the count is exact.

// valRef locates an interned value in the arena.
type valRef struct{ chunk, off, n uint32 }

const (
	arenaChunk  = 256 << 10
	smallSetMax = 8
)

// valueDict interns values. Ids are reused after their last reference goes.
type valueDict struct {
	seed   maphash.Seed
	ents   []uint64 // open addressing: low 32 bits of the hash << 32 | id+1; 0 empty
	mask   uint64
	n      int
	refs   []valRef
	counts []int32 // sets holding the value; 0 = free id
	free   []uint32
	chunks [][]byte
	live   int // bytes of values in use
	dead   int // bytes of released values still in the chunks
}

func newValueDict() valueDict {
	d := valueDict{seed: maphash.MakeSeed()}
	d.ents = make([]uint64, keyIndexMinCap)
	d.mask = keyIndexMinCap - 1
	return d
}

func (d *valueDict) bytes(id uint32) []byte {
	r := d.refs[id]
	return d.chunks[r.chunk][r.off : r.off+r.n : r.off+r.n]
}

// ranks returns, indexed by id, each live value's rank in the order of the
// values' bytes (free ids get any rank), reusing buf.
func (d *valueDict) ranks(buf []uint32) []uint32 {
	ids := make([]uint32, 0, d.n)
	for id, c := range d.counts {
		if c > 0 {
			ids = append(ids, uint32(id))
		}
	}
	slices.SortFunc(ids, func(x, y uint32) int { return bytes.Compare(d.bytes(x), d.bytes(y)) })
	buf = slices.Grow(buf[:0], len(d.refs))[:len(d.refs)]
	for r, id := range ids {
		buf[id] = uint32(r)
	}
	return buf
}

func (d *valueDict) hash(v []byte) uint32 { return uint32(maphash.Bytes(d.seed, v)) }

// intern returns the id of v, adding it (with no reference yet) if new.
func (d *valueDict) intern(v []byte) uint32 {
	h := d.hash(v)
	i := uint64(h) & d.mask
	for {
		e := d.ents[i]
		if e == 0 {
			break
		}
		if uint32(e>>32) == h {
			if id := uint32(e) - 1; string(d.bytes(id)) == string(v) {
				return id
			}
		}
		i = (i + 1) & d.mask
	}
	ref := d.store(v)
	var id uint32
	if n := len(d.free); n > 0 {
		id = d.free[n-1]
		d.free = d.free[:n-1]
		d.refs[id] = ref
	} else {
		id = uint32(len(d.refs))
		d.refs = append(d.refs, ref)
		d.counts = append(d.counts, 0)
	}
	d.ents[i] = uint64(h)<<32 | uint64(id+1)
	d.n++
	if 2*d.n > len(d.ents) {
		d.grow()
	}
	return id
}

// store copies v into the arena.
func (d *valueDict) store(v []byte) valRef {
	last := len(d.chunks) - 1
	if last < 0 || len(d.chunks[last])+len(v) > cap(d.chunks[last]) {
		d.chunks = append(d.chunks, make([]byte, 0, max(arenaChunk, len(v))))
		last++
	}
	c := d.chunks[last]
	ref := valRef{chunk: uint32(last), off: uint32(len(c)), n: uint32(len(v))}
	d.chunks[last] = append(c, v...)
	d.live += len(v)
	return ref
}

func (d *valueDict) grow() {
	old := d.ents
	d.ents = make([]uint64, 2*len(old))
	d.mask = uint64(len(d.ents) - 1)
	for _, e := range old {
		if e == 0 {
			continue
		}
		i := (e >> 32) & d.mask
		for d.ents[i] != 0 {
			i = (i + 1) & d.mask
		}
		d.ents[i] = e
	}
}

// retain adds a reference to id.
func (d *valueDict) retain(id uint32) { d.counts[id]++ }

// release drops a reference to id and frees the value with its last one.
func (d *valueDict) release(id uint32) {
	if d.counts[id]--; d.counts[id] > 0 {
		return
	}
	v := d.bytes(id)
	h := d.hash(v)
	want := uint64(h)<<32 | uint64(id+1)
	i := uint64(h) & d.mask
	for d.ents[i] != want {
		i = (i + 1) & d.mask
	}
	for j := i; ; { // backward shift, as keyIndex.remove
		j = (j + 1) & d.mask
		e := d.ents[j]
		if e == 0 {
			break
		}
		if home := (e >> 32) & d.mask; (j-home)&d.mask >= (j-i)&d.mask {
			d.ents[i] = e
			i = j
		}
	}
	d.ents[i] = 0
	d.n--
	d.live -= len(v)
	d.dead += len(v)
	d.refs[id] = valRef{}
	d.free = append(d.free, id)
	if d.dead > d.live && d.dead > 4*arenaChunk {
		d.compact()
	}
}

// compact copies the values in use to new chunks, dropping released bytes.
func (d *valueDict) compact() {
	old := d.chunks
	d.chunks, d.live, d.dead = nil, 0, 0
	for id, c := range d.counts {
		if c > 0 {
			r := d.refs[id]
			d.refs[id] = d.store(old[r.chunk][r.off : r.off+r.n])
		}
	}
}

// idSet is a set of value ids: a list of up to smallSetMax ids, or (big)
// an open-addressing table of id+1 (0 empty) of power-of-two length.
type idSet struct {
	ids []uint32
	n   int32
	big bool
}

func setHash(id uint32, tz int) uint32 { return (id * 0x9E3779B9) >> (32 - tz) }

// add inserts id and reports whether it was new.
func (s *idSet) add(id uint32) bool {
	if !s.big {
		if slices.Contains(s.ids, id) {
			return false
		}
		if len(s.ids) < smallSetMax {
			if s.ids == nil {
				s.ids = make([]uint32, 0, 4)
			}
			s.ids = append(s.ids, id)
			s.n++
			return true
		}
		small := s.ids
		s.ids, s.n, s.big = make([]uint32, 4*smallSetMax), 0, true
		for _, x := range small {
			s.tabAdd(x)
		}
	}
	if !s.tabAdd(id) {
		return false
	}
	if 4*int(s.n) > 3*len(s.ids) {
		old := s.ids
		s.ids, s.n = make([]uint32, 2*len(old)), 0
		for _, e := range old {
			if e != 0 {
				s.tabAdd(e - 1)
			}
		}
	}
	return true
}

func (s *idSet) tabAdd(id uint32) bool {
	tz := bits.TrailingZeros(uint(len(s.ids)))
	mask := uint32(len(s.ids) - 1)
	for i := setHash(id, tz); ; i = (i + 1) & mask {
		switch s.ids[i] {
		case 0:
			s.ids[i] = id + 1
			s.n++
			return true
		case id + 1:
			return false
		}
	}
}

// appendIDs appends the set's ids to dst.
func (s *idSet) appendIDs(dst []uint32) []uint32 {
	if !s.big {
		return append(dst, s.ids...)
	}
	for _, e := range s.ids {
		if e != 0 {
			dst = append(dst, e-1)
		}
	}
	return dst
}

// freshTracker is an accumulator whose state grows with its input (a
// count_distinct set) and that can write, for a window that existed at the
// last snapshot point, only what was added to it since: the merge rows of
// Window.SnapshotDeltaMerges. Restoring such a row adds to the window's
// state instead of replacing it.
type freshTracker interface {
	// trackSlots gives the Window's slot table, whose inBase says which
	// slots' additions to log.
	trackSlots(slots *[]slotInfo)
	// clearFresh forgets the additions logged (a snapshot point).
	clearFresh()
	// appendFresh is appendState of only what was added to each slot
	// since the last snapshot point.
	appendFresh(bs []array.Builder, slots []int32) error
}

// freshID is a value added to a slot whose window existed at the last
// snapshot point.
type freshID struct {
	slot int32
	id   uint32
}

// distinctAcc is count_distinct's accumulator.
type distinctAcc struct {
	kind    byte
	dict    valueDict
	sets    []idSet
	buf     []byte
	scratch []uint32
	vals    [][]byte
	rank    []uint32 // appendState's ranks of the dictionary's values
	sink    uint32   // appendState's loads ahead

	// Merge deltas: the Window's slot table (trackSlots), the values added
	// since the last snapshot point to slots then inBase, in order of
	// addition, and, once appendFresh sorted them by slot, each slot's run.
	slots   *[]slotInfo
	fresh   []freshID
	freshAt map[int32][2]int32
}

func newDistinctAcc(kind byte) *distinctAcc {
	return &distinctAcc{kind: kind, dict: newValueDict()}
}

func (a *distinctAcc) grow(n int) { a.sets = growTo(a.sets, n) }

func (a *distinctAcc) reset(slot int32) {
	s := &a.sets[slot]
	if s.n == 0 {
		return
	}
	a.scratch = s.appendIDs(a.scratch[:0])
	for _, id := range a.scratch {
		a.dict.release(id)
	}
	if s.big {
		*s = idSet{}
	} else {
		s.ids, s.n = s.ids[:0], 0
	}
}

func (a *distinctAcc) addID(slot int32, id uint32) {
	if a.sets[slot].add(id) {
		a.dict.retain(id)
		if a.slots != nil && int(slot) < len(*a.slots) && (*a.slots)[slot].inBase {
			a.fresh = append(a.fresh, freshID{slot, id})
			a.freshAt = nil // appendFresh indexes the log anew
		}
	}
}

func (a *distinctAcc) trackSlots(slots *[]slotInfo) { a.slots = slots }

func (a *distinctAcc) clearFresh() {
	a.fresh, a.freshAt = a.fresh[:0], nil
	if cap(a.fresh) > 1<<16 {
		a.fresh = nil
	}
}

// appendFresh writes each slot's values added since the last snapshot
// point (a slot whose window existed then: its ids are live, each logged
// once, as add reports a value new to the set once), sorted by their bytes
// like appendState's.
func (a *distinctAcc) appendFresh(bs []array.Builder, slots []int32) error {
	lb, vb, err := stateBuilders(bs)
	if err != nil {
		return err
	}
	if a.freshAt == nil {
		slices.SortStableFunc(a.fresh, func(x, y freshID) int { return cmp.Compare(x.slot, y.slot) })
		a.freshAt = make(map[int32][2]int32)
		for i := 0; i < len(a.fresh); {
			j := i + 1
			for j < len(a.fresh) && a.fresh[j].slot == a.fresh[i].slot {
				j++
			}
			a.freshAt[a.fresh[i].slot] = [2]int32{int32(i), int32(j)}
			i = j
		}
	}
	for _, s := range slots {
		run := a.freshAt[s]
		a.scratch = a.scratch[:0]
		for _, f := range a.fresh[run[0]:run[1]] {
			a.scratch = append(a.scratch, f.id)
		}
		a.appendSorted(lb, vb, a.scratch)
	}
	return nil
}

// stateBuilders returns the list and value builders of a count_distinct
// state column.
func stateBuilders(bs []array.Builder) (*array.ListBuilder, *array.BinaryBuilder, error) {
	lb, ok := bs[0].(*array.ListBuilder)
	if !ok {
		return nil, nil, fmt.Errorf("count_distinct: cannot append state to %T", bs[0])
	}
	vb, ok := lb.ValueBuilder().(*array.BinaryBuilder)
	if !ok {
		return nil, nil, fmt.Errorf("count_distinct: list values builder is %T", lb.ValueBuilder())
	}
	return lb, vb, nil
}

// appendSorted appends one list of the values of ids, sorted by their bytes.
func (a *distinctAcc) appendSorted(lb *array.ListBuilder, vb *array.BinaryBuilder, ids []uint32) {
	lb.Append(true)
	a.vals = a.vals[:0]
	for _, id := range ids {
		a.vals = append(a.vals, a.dict.bytes(id))
	}
	slices.SortFunc(a.vals, bytes.Compare)
	for _, v := range a.vals {
		vb.Append(v)
	}
}

// add puts encoded value v into slot's set.
func (a *distinctAcc) add(slot int32, v []byte) {
	a.addID(slot, a.dict.intern(v))
}

func (a *distinctAcc) merge(dst, src int32) {
	a.scratch = a.sets[src].appendIDs(a.scratch[:0])
	for _, id := range a.scratch {
		a.addID(dst, id)
	}
}

func (a *distinctAcc) update(u *updateBatch) {
	bc := bindColumn(a.kind, u.col)
	for j, r := range u.rows {
		if !bc.valid(int(r)) {
			continue
		}
		a.buf = bc.append(a.buf[:0], int(r))
		a.add(u.slots[j], a.buf)
	}
}

func (a *distinctAcc) resultType() arrow.DataType { return arrow.PrimitiveTypes.Int64 }

func (a *distinctAcc) appendResults(b array.Builder, slots []int32) error {
	ib, ok := b.(*array.Int64Builder)
	if !ok {
		return fmt.Errorf("count_distinct: cannot append to %T", b)
	}
	for _, s := range slots {
		ib.Append(int64(a.sets[s].n))
	}
	return nil
}

func (a *distinctAcc) stateFields(name string) []arrow.Field {
	return []arrow.Field{{Name: name + ".values", Type: arrow.ListOf(arrow.BinaryTypes.Binary)}}
}

// appendState writes each slot's values sorted by their bytes. When the
// slots hold at least as many values as the dictionary has, it ranks the
// dictionary's values by their bytes once and orders each slot's ids by
// rank, an integer sort, instead of comparing the values' bytes slot by slot.
func (a *distinctAcc) appendState(bs []array.Builder, slots []int32) error {
	lb, vb, err := stateBuilders(bs)
	if err != nil {
		return err
	}
	total := 0
	for _, s := range slots {
		total += int(a.sets[s].n)
	}
	vb.Reserve(total)
	if live := a.dict.n; live > 0 {
		vb.ReserveData(total * (a.dict.live/live + 1))
	}
	if live := a.dict.n; live > 0 && live <= total {
		rank := a.dict.ranks(a.rank)
		a.rank = rank
		var keyed []uint64
		for lo := 0; lo < len(slots); lo += prefetchRows {
			group := slots[lo:min(len(slots), lo+prefetchRows)]
			// The slots come in state order, scattered over the table,
			// and each set's ids are an allocation of their own: load
			// the group's sets, then their ids, before reading any, so
			// that the cache misses overlap.
			var sink uint32
			for _, s := range group {
				sink += uint32(a.sets[s].n)
			}
			for _, s := range group {
				if ids := a.sets[s].ids; len(ids) > 0 {
					sink += ids[0]
				}
			}
			a.sink += sink
			for _, s := range group {
				lb.Append(true)
				a.scratch = a.sets[s].appendIDs(a.scratch[:0])
				keyed = keyed[:0]
				for _, id := range a.scratch {
					keyed = append(keyed, uint64(rank[id])<<32|uint64(id))
				}
				slices.Sort(keyed)
				for _, k := range keyed {
					vb.Append(a.dict.bytes(uint32(k)))
				}
			}
		}
		return nil
	}
	for _, s := range slots {
		a.scratch = a.sets[s].appendIDs(a.scratch[:0])
		a.appendSorted(lb, vb, a.scratch)
	}
	return nil
}

func (a *distinctAcc) restore(cols []arrow.Array, rows, slots []int32) (int64, error) {
	la, ok := cols[0].(*array.List)
	if !ok {
		return -1, fmt.Errorf("count_distinct state is %T, want list<binary>", cols[0])
	}
	vals, ok := la.ListValues().(*array.Binary)
	if !ok {
		return -1, fmt.Errorf("count_distinct state values are %T, want binary", la.ListValues())
	}
	for j, r := range rows {
		lo, hi := la.ValueOffsets(int(r))
		s := slots[j]
		for i := lo; i < hi; i++ {
			a.add(s, vals.Value(int(i)))
		}
	}
	return -1, nil
}
