package operators

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/keygroup"
)

// MarkKeyGroups sets mark[g-lo] for the key group g of every row sel of rec
// (nil: every row) whose group lies in [lo, lo+len(mark)), with k key
// groups, and returns how many marks it newly set. It is how a reader tells
// which key groups a batch touches before it decides what state to decode.
func MarkKeyGroups(rec arrow.RecordBatch, keyCols []int, k int, sel []int32, lo int, mark []bool) (int, error) {
	if rec == nil || rec.NumRows() == 0 {
		return 0, nil
	}
	kinds, err := keyKindsDict(rec.Schema(), keyCols)
	if err != nil {
		return 0, fmt.Errorf("mark key groups: %w", err)
	}
	cols := make([]arrow.Array, len(keyCols))
	for i, c := range keyCols {
		cols[i] = rec.Column(c)
	}
	var enc keyEncoder
	enc.bind(kinds, cols)
	var buf []byte
	n := 0
	visit := func(i int) {
		buf = enc.encode(buf[:0], i)
		if g := keygroup.Of(buf, k) - lo; g >= 0 && g < len(mark) && !mark[g] {
			mark[g] = true
			n++
		}
	}
	if sel == nil {
		for i := range int(rec.NumRows()) {
			visit(i)
		}
		return n, nil
	}
	for _, i := range sel {
		visit(int(i))
	}
	return n, nil
}

// CanonicalOrder returns the rows of recs (one schema) as one batch in an
// order that depends only on their values: sorted by the key encoding of
// every column (columns of types keys cannot hold are ignored; rows equal
// in every other column keep their order). A stage whose output feeds
// another keyed stage hands it on in this order, so that the next stage's
// arrival order (which breaks its ties) does not depend on how many
// subtasks produced the rows. The caller releases the result; nil when
// recs hold no rows.
//
// The rows' encodings are written once into one buffer; the sort compares
// 16 bytes of each taken after the prefix all of them share (two uint64), and
// the rest of the encodings, then the input position, only on a tie, which
// gives the order of a stable sort by the encodings.
func CanonicalOrder(recs []arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	if n == 0 {
		return nil, nil
	}
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("canonical order: %d rows, more than one batch can sort", n)
	}
	schema := recs[0].Schema()
	var all arrow.RecordBatch
	if len(recs) == 1 {
		all = recs[0]
		all.Retain()
	} else {
		cols := make([]arrow.Array, schema.NumFields())
		for c := range cols {
			parts := make([]arrow.Array, len(recs))
			for i, r := range recs {
				parts[i] = r.Column(c)
			}
			a, err := array.Concatenate(parts, mem)
			if err != nil {
				for _, x := range cols[:c] {
					x.Release()
				}
				return nil, fmt.Errorf("canonical order: column %q: %w", schema.Field(c).Name, err)
			}
			cols[c] = a
		}
		all = array.NewRecordBatch(schema, cols, n)
		for _, c := range cols {
			c.Release()
		}
	}
	defer all.Release()
	var keyCols []int
	var kinds []byte
	for c, f := range schema.Fields() {
		if k := kindOf(f.Type); k != tagOther {
			keyCols = append(keyCols, c)
			kinds = append(kinds, k)
		}
	}
	var enc keyEncoder
	kc := make([]arrow.Array, len(keyCols))
	for i, c := range keyCols {
		kc[i] = all.Column(c)
	}
	enc.bind(kinds, kc)
	ends := make([]int, n) // key i is buf[ends[i-1]:ends[i]]
	var buf []byte
	for i := range int(n) {
		buf = enc.encode(buf, i)
		ends[i] = len(buf)
		if i == 0 { // room for n keys as long as the first (strings may need more)
			buf = slices.Grow(buf, (int(n)-1)*len(buf)+len(buf)/2)
		}
	}
	key := func(i int32) []byte {
		lo := 0
		if i > 0 {
			lo = ends[i-1]
		}
		return buf[lo:ends[i]]
	}
	// The prefix every key shares orders nothing.
	first := key(0)
	shared := len(first)
	for i := int32(1); i < int32(n) && shared > 0; i++ {
		k := key(i)
		m := min(shared, len(k))
		j := 0
		for j < m && k[j] == first[j] {
			j++
		}
		shared = j
	}
	type ent struct {
		p0, p1 uint64 // bytes [shared, shared+16) of the key, zero-padded
		i      int32
	}
	ents := make([]ent, n)
	sorted := true
	for i := range ents {
		k := key(int32(i))
		var b [16]byte
		if shared < len(k) {
			copy(b[:], k[shared:])
		}
		ents[i] = ent{p0: binary.BigEndian.Uint64(b[:8]), p1: binary.BigEndian.Uint64(b[8:]), i: int32(i)}
		if i > 0 && sorted && (ents[i-1].p0 > ents[i].p0 || ents[i-1].p0 == ents[i].p0 && ents[i-1].p1 > ents[i].p1) {
			sorted = false
		}
	}
	less := func(a, b ent) int {
		if a.p0 != b.p0 {
			if a.p0 < b.p0 {
				return -1
			}
			return 1
		}
		if a.p1 != b.p1 {
			if a.p1 < b.p1 {
				return -1
			}
			return 1
		}
		if c := bytes.Compare(key(a.i)[shared:], key(b.i)[shared:]); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	}
	if sorted {
		sorted = slices.IsSortedFunc(ents, less)
	}
	if sorted {
		all.Retain()
		return all, nil
	}
	slices.SortFunc(ents, less)
	idx := make([]int32, n)
	for i, e := range ents {
		idx[i] = e.i
	}
	return takeRows(all, idx, mem)
}
