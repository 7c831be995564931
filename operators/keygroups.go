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
// The rows' encodings are written once, into chunks; the sort compares
// 16 bytes of each taken after the prefix all of them share (two uint64), and
// the rest of the encodings, then the input position, only on a tie, which
// gives the order of a stable sort by the encodings. The rows are then
// gathered from recs in that order (no concatenation first).
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
	for b, r := range recs[1:] { // the gather reads every batch's columns as batch 0's types
		if int(r.NumCols()) != schema.NumFields() {
			return nil, fmt.Errorf("canonical order: batch %d has %d columns, batch 0 %d", b+1, r.NumCols(), schema.NumFields())
		}
		for c, f := range schema.Fields() {
			if !arrow.TypeEqual(r.Column(c).DataType(), f.Type) {
				return nil, fmt.Errorf("canonical order: batch %d column %q is %s, batch 0's %s", b+1, f.Name, r.Column(c).DataType(), f.Type)
			}
		}
	}
	var keyCols []int
	var kinds []byte
	for c, f := range schema.Fields() {
		if k := kindOf(f.Type); k != tagOther {
			keyCols = append(keyCols, c)
			kinds = append(kinds, k)
		}
	}
	// The encodings go into chunks of canonChunk bytes (a chunk outgrows its
	// room at most once, by its last key), so the bytes are never copied to
	// grow one buffer holding them all (with long strings, hundreds of
	// megabytes); locs says where each row is, batch and row.
	var enc keyEncoder
	kc := make([]arrow.Array, len(keyCols))
	refs := make([]keyRef, n)
	locs := make([]rowLoc, n)
	var chunks [][]byte
	cur := -1
	i, size := 0, 0
	for b, r := range recs {
		for k, c := range keyCols {
			kc[k] = r.Column(c)
		}
		enc.bind(kinds, kc)
		for row := range int(r.NumRows()) {
			if cur < 0 || len(chunks[cur]) >= canonChunk {
				// Room for the rows left at the mean length so far (the
				// first key's, to begin with), within a chunk.
				per := 64
				if i > 0 {
					per = size/i + 1
				} else if r.NumRows() > 0 {
					per = len(enc.encode(nil, 0)) + 8
				}
				chunks = append(chunks, make([]byte, 0, min(canonChunk+canonChunk/8, 64+int(n-int64(i))*per*9/8)))
				cur++
			}
			at := len(chunks[cur])
			chunks[cur] = enc.encode(chunks[cur], row)
			refs[i] = keyRef{chunk: int32(cur), off: int32(at), end: int32(len(chunks[cur]))}
			size += len(chunks[cur]) - at
			locs[i] = rowLoc{chunk: int32(b), idx: int32(row)}
			i++
		}
	}
	key := func(i int32) []byte {
		r := refs[i]
		return chunks[r.chunk][r.off:r.end:r.end]
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
	if sorted && len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	switch {
	case sorted:
	case len(ents) < radixSortIDs:
		slices.SortFunc(ents, less)
	default:
		// Radix by the 16 bytes (stable: ties stay in row order), then the
		// runs that agree on them by the rest of the key.
		byPrefix := radixSorted(len(ents), 2, func(w, i int) uint64 {
			if w == 0 {
				return ents[i].p0
			}
			return ents[i].p1
		})
		out := make([]ent, 0, len(ents))
		forRuns(byPrefix, func(x, y int32) bool { return ents[x].p0 == ents[y].p0 && ents[x].p1 == ents[y].p1 }, func(_ int, rs []radixEnt) {
			at := len(out)
			for _, e := range rs {
				out = append(out, ents[e.i])
			}
			if len(rs) > 1 {
				slices.SortFunc(out[at:], less)
			}
		})
		ents = out
	}
	order := make([]rowLoc, n)
	for i, e := range ents {
		order[i] = locs[e.i]
	}
	return gatherRows(recs, schema, order, mem)
}

// canonChunk is the size of CanonicalOrder's chunks of key encodings.
const canonChunk = 16 << 20

// keyRef is where one row's key encoding is: chunk, bytes [off, end).
type keyRef struct {
	chunk, off, end int32
}

// gatherRows returns the rows at locs (batch, row) of recs, which have
// schema, as one batch: gathered column by column (gatherColumn), or for the
// types it leaves out taken from the batches' concatenation.
func gatherRows(recs []arrow.RecordBatch, schema *arrow.Schema, locs []rowLoc, mem memory.Allocator) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, 0, schema.NumFields())
	defer func() { releaseArrays(cols) }() // the batch holds its own references
	var idx []int32
	for f, fd := range schema.Fields() {
		if a, ok := gatherColumn(recs, f, fd.Type, locs, mem); ok {
			cols = append(cols, a)
			continue
		}
		if idx == nil {
			starts := make([]int32, len(recs))
			var at int32
			for b, r := range recs {
				starts[b] = at
				at += int32(r.NumRows())
			}
			idx = make([]int32, len(locs))
			for j, l := range locs {
				idx[j] = starts[l.chunk] + l.idx
			}
		}
		parts := make([]arrow.Array, len(recs))
		for b, r := range recs {
			parts[b] = r.Column(f)
		}
		whole, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, fmt.Errorf("canonical order: column %q: %w", fd.Name, err)
		}
		a, err := takeArrays([]arrow.Array{whole}, idx, mem)
		whole.Release()
		if err != nil {
			return nil, fmt.Errorf("canonical order: column %q: %w", fd.Name, err)
		}
		cols = append(cols, a[0])
	}
	out := array.NewRecordBatch(schema, cols, int64(len(locs)))
	return out, nil
}
