package operators

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Helpers shared by Join and Lookup: the buffered-row store, gathering rows
// into new arrays, and the output-schema naming rule.

// DefaultRightPrefix is the prefix given to a right (or lookup table) column
// whose name clashes with an output column before it.
const DefaultRightPrefix = "right_"

// rowLoc locates one buffered row: its chunk and its index in the chunk. A
// chunk of -1 stands for a null row (the missing right side of a left join).
type rowLoc struct {
	chunk, idx int32
}

var nullLoc = rowLoc{chunk: -1, idx: -1}

// rowStore holds buffered rows of one schema as a list of chunks: record
// batches copied, with their selected rows only, from the caller's batches.
// Its buffers come from a private Go allocator (Go memory, reclaimed by the
// garbage collector), never from the allocator the caller gives the
// operator, so between calls an operator holds none of the caller's Arrow
// memory and the caller may release every batch it passed in.
//
// A chunk may be lazy (addLazy): rows restored from state whose columns
// are not decoded yet. Its columns are decoded, and its rows copied, the
// first time a gather needs one of its rows; until then it costs its row
// list and a reference to the encoded state. Compaction leaves lazy chunks
// alone.
type rowStore struct {
	schema *arrow.Schema
	mem    memory.Allocator
	chunks []arrow.RecordBatch // nil once all its rows are dropped, or while lazy
	lazy   []*lazyChunk        // per chunk: non-nil while its columns are not decoded
	live   []int32             // live rows per chunk
	rows   int                 // rows held in chunks, live or not
	nlive  int                 // live rows

	nlazy              int // lazy chunks
	lazyRows, lazyLive int // rows, and live rows, of lazy chunks
}

// lazyChunk is a chunk whose columns are decoded on demand: load returns
// the columns (s.schema's fields, in order) of a batch that holds the
// chunk's rows at rows, in chunk order. The arrays load returns are the
// caller's to release.
type lazyChunk struct {
	load func() ([]arrow.Array, error)
	rows []int32
}

func newRowStore(schema *arrow.Schema) rowStore {
	return rowStore{schema: schema, mem: memory.NewGoAllocator()}
}

// add takes ownership of rec (allocated from s.mem) as a new chunk.
func (s *rowStore) add(rec arrow.RecordBatch) int32 {
	s.chunks = append(s.chunks, rec)
	s.lazy = append(s.lazy, nil)
	s.live = append(s.live, int32(rec.NumRows()))
	s.rows += int(rec.NumRows())
	s.nlive += int(rec.NumRows())
	return int32(len(s.chunks) - 1)
}

// copyRows copies rows idx of rec into a new chunk and returns its index.
func (s *rowStore) copyRows(rec arrow.RecordBatch, idx []int32) (int32, error) {
	out, err := takeRows(rec, idx, s.mem)
	if err != nil {
		return -1, err
	}
	if !out.Schema().Equal(s.schema) {
		cols := out.Columns()
		fixed := array.NewRecordBatch(s.schema, cols, out.NumRows())
		out.Release()
		out = fixed
	}
	return s.add(out), nil
}

// copyColumns copies rows idx of columns cols (of s.schema's types) into a
// new chunk and returns its index.
func (s *rowStore) copyColumns(cols []arrow.Array, idx []int32) (int32, error) {
	taken, err := takeArrays(cols, idx, s.mem)
	if err != nil {
		return -1, err
	}
	rec := array.NewRecordBatch(s.schema, taken, int64(len(idx)))
	releaseArrays(taken)
	return s.add(rec), nil
}

// addLazy adds a lazy chunk of len(rows) rows (see lazyChunk) and returns
// its index.
func (s *rowStore) addLazy(load func() ([]arrow.Array, error), rows []int32) int32 {
	s.chunks = append(s.chunks, nil)
	s.lazy = append(s.lazy, &lazyChunk{load: load, rows: rows})
	s.live = append(s.live, int32(len(rows)))
	s.rows += len(rows)
	s.nlive += len(rows)
	s.nlazy++
	s.lazyRows += len(rows)
	s.lazyLive += len(rows)
	return int32(len(s.chunks) - 1)
}

// materialize decodes lazy chunk c and copies its rows into a chunk like
// any other.
func (s *rowStore) materialize(c int32) error {
	lc := s.lazy[c]
	cols, err := lc.load()
	if err != nil {
		return fmt.Errorf("decode restored rows: %w", err)
	}
	defer releaseArrays(cols)
	if len(cols) != s.schema.NumFields() {
		return fmt.Errorf("decode restored rows: %d columns, want %d", len(cols), s.schema.NumFields())
	}
	for i, c := range cols {
		if f := s.schema.Field(i); !arrow.TypeEqual(c.DataType(), f.Type) {
			return fmt.Errorf("decode restored rows: column %q is %s, want %s", f.Name, c.DataType(), f.Type)
		}
		for _, r := range lc.rows {
			if int(r) >= c.Len() {
				return fmt.Errorf("decode restored rows: column %q has %d rows, row %d wanted", s.schema.Field(i).Name, c.Len(), r)
			}
		}
	}
	taken, err := takeArrays(cols, lc.rows, s.mem)
	if err != nil {
		return fmt.Errorf("decode restored rows: %w", err)
	}
	s.chunks[c] = array.NewRecordBatch(s.schema, taken, int64(len(lc.rows)))
	releaseArrays(taken)
	s.lazy[c] = nil
	s.nlazy--
	s.lazyRows -= len(lc.rows)
	s.lazyLive -= int(s.live[c])
	return nil
}

// materializeAll decodes every lazy chunk.
func (s *rowStore) materializeAll() error {
	for c := range s.lazy {
		if s.lazy[c] != nil {
			if err := s.materialize(int32(c)); err != nil {
				return err
			}
		}
	}
	return nil
}

// drop forgets one row of chunk c, releasing the chunk with its last row.
func (s *rowStore) drop(c int32) {
	s.live[c]--
	s.nlive--
	if lc := s.lazy[c]; lc != nil {
		s.lazyLive--
		if s.live[c] == 0 {
			s.rows -= len(lc.rows)
			s.lazyRows -= len(lc.rows)
			s.nlazy--
			s.lazy[c] = nil
		}
		return
	}
	if s.live[c] == 0 {
		s.rows -= int(s.chunks[c].NumRows())
		s.chunks[c].Release()
		s.chunks[c] = nil
	}
}

// needsCompaction reports whether the decoded chunks are many or mostly
// dead rows.
func (s *rowStore) needsCompaction() bool {
	return len(s.chunks)-s.nlazy > 64 || s.rows-s.lazyRows > 2*(s.nlive-s.lazyLive)+4096
}

// reset releases every chunk.
func (s *rowStore) reset() {
	for _, c := range s.chunks {
		if c != nil {
			c.Release()
		}
	}
	s.chunks, s.lazy, s.live, s.rows, s.nlive = nil, nil, nil, 0, 0
	s.nlazy, s.lazyRows, s.lazyLive = 0, 0, 0
}

// compact copies the rows at locs (every live row) of decoded chunks into
// one chunk, releases the old chunks and returns the new locations, in locs
// order. Lazy chunks stay lazy (renumbered, first).
func (s *rowStore) compact(locs []rowLoc) ([]rowLoc, error) {
	out := make([]rowLoc, len(locs))
	var dec []rowLoc
	var at []int
	renum := make([]int32, len(s.chunks))
	var nc int32
	for c := range s.chunks {
		if s.lazy[c] != nil {
			renum[c] = nc
			nc++
		}
	}
	for i, l := range locs {
		if s.lazy[l.chunk] != nil {
			out[i] = rowLoc{chunk: renum[l.chunk], idx: l.idx}
			continue
		}
		dec = append(dec, l)
		at = append(at, i)
	}
	cols, err := s.gather(dec, s.mem)
	if err != nil {
		return nil, err
	}
	rec := array.NewRecordBatch(s.schema, cols, int64(len(dec)))
	releaseArrays(cols)
	var lazy []*lazyChunk
	var live []int32
	for c := range s.chunks {
		if s.lazy[c] != nil {
			lazy, live = append(lazy, s.lazy[c]), append(live, s.live[c])
		} else if s.chunks[c] != nil {
			s.chunks[c].Release()
		}
	}
	s.chunks, s.lazy, s.live = make([]arrow.RecordBatch, len(lazy)), lazy, live
	s.rows, s.nlive = s.lazyRows, s.lazyLive
	c := s.add(rec)
	for x, i := range at {
		out[i] = rowLoc{chunk: c, idx: int32(x)}
	}
	return out, nil
}

// gather returns one array per field of s.schema with the rows at locs, in
// order (null rows for nullLoc), allocated from mem. The caller releases
// them.
func (s *rowStore) gather(locs []rowLoc, mem memory.Allocator) ([]arrow.Array, error) {
	n := len(locs)
	nf := s.schema.NumFields()
	cols := make([]arrow.Array, 0, nf)
	fail := func(err error) ([]arrow.Array, error) {
		releaseArrays(cols)
		return nil, err
	}
	// The rows per chunk: which chunks are used (start), and for the take
	// below, the rows grouped by chunk in chunk order.
	start := make([]int32, len(s.chunks)+1)
	for _, l := range locs {
		if l.chunk >= 0 {
			start[l.chunk+1]++
		}
	}
	for c := range s.chunks {
		start[c+1] += start[c]
	}
	total := int(start[len(s.chunks)])
	if total == 0 {
		for _, f := range s.schema.Fields() {
			cols = append(cols, array.MakeArrayOfNull(mem, f.Type, n))
		}
		return cols, nil
	}
	var used []int32
	for c := range s.chunks {
		if start[c+1] > start[c] {
			if s.lazy[c] != nil {
				if err := s.materialize(int32(c)); err != nil {
					return fail(err)
				}
			}
			if s.chunks[c] == nil {
				return fail(fmt.Errorf("row store: chunk %d was released", c))
			}
			used = append(used, int32(c))
		}
	}
	ctx := compute.WithAllocator(context.Background(), mem)
	var idxArrs []arrow.Array
	var perm arrow.Array
	identity := false
	defer func() {
		releaseArrays(idxArrs)
		if perm != nil {
			perm.Release()
		}
	}()
	for f := range nf {
		if a, ok := gatherColumn(s.chunks, f, s.schema.Field(f).Type, locs, mem); ok {
			cols = append(cols, a)
			continue
		}
		if idxArrs == nil { // the take's indices, for the types gatherColumn leaves to it
			// pos[j] is where row j lands in the concatenation of the groups.
			next := make([]int32, len(s.chunks))
			copy(next, start)
			byChunk := make([]int32, total)
			pos := make([]int32, n)
			identity = total == n
			for j, l := range locs {
				if l.chunk < 0 {
					pos[j] = -1
					continue
				}
				p := next[l.chunk]
				next[l.chunk]++
				byChunk[p] = l.idx
				pos[j] = p
				identity = identity && int(p) == j
			}
			idxArrs = make([]arrow.Array, len(used))
			for i, c := range used {
				idxArrs[i] = int32Array(mem, byChunk[start[c]:start[c+1]], nil)
			}
			if !identity {
				valid := make([]bool, n)
				for j, p := range pos {
					valid[j] = p >= 0
					if p < 0 {
						pos[j] = 0
					}
				}
				perm = int32Array(mem, pos, valid)
			}
		}
		parts := make([]arrow.Array, 0, len(used))
		for i, c := range used {
			part, err := takeTrusted(ctx, s.chunks[c].Column(f), idxArrs[i])
			if err != nil {
				releaseArrays(parts)
				return fail(fmt.Errorf("take column %q: %w", s.schema.Field(f).Name, err))
			}
			parts = append(parts, part)
		}
		combined := parts[0]
		if len(parts) > 1 {
			var err error
			combined, err = array.Concatenate(parts, mem)
			releaseArrays(parts)
			if err != nil {
				return fail(fmt.Errorf("concatenate column %q: %w", s.schema.Field(f).Name, err))
			}
		}
		if identity {
			cols = append(cols, combined)
			continue
		}
		out, err := takeTrusted(ctx, combined, perm)
		combined.Release()
		if err != nil {
			return fail(fmt.Errorf("take column %q: %w", s.schema.Field(f).Name, err))
		}
		cols = append(cols, out)
	}
	return cols, nil
}

// int32Array builds an int32 array of vs (valid nil: all valid).
func int32Array(mem memory.Allocator, vs []int32, valid []bool) arrow.Array {
	b := array.NewInt32Builder(mem)
	defer b.Release()
	b.AppendValues(vs, valid)
	return b.NewArray()
}

// takeArrays returns rows idx of every array of cols, allocated from mem.
func takeArrays(cols []arrow.Array, idx []int32, mem memory.Allocator) ([]arrow.Array, error) {
	for _, c := range cols {
		if err := checkRows(idx, c.Len()); err != nil {
			return nil, err
		}
	}
	ia := int32Array(mem, idx, nil)
	defer ia.Release()
	ctx := compute.WithAllocator(context.Background(), mem)
	out := make([]arrow.Array, 0, len(cols))
	for i, c := range cols {
		t, err := takeTrusted(ctx, c, ia)
		if err != nil {
			releaseArrays(out)
			return nil, fmt.Errorf("take column %d: %w", i, err)
		}
		out = append(out, t)
	}
	return out, nil
}

func releaseArrays(as []arrow.Array) {
	for _, a := range as {
		if a != nil {
			a.Release()
		}
	}
}

// addSat returns a+b clamped to the int64 range.
func addSat(a, b int64) int64 {
	c := a + b
	switch {
	case b > 0 && c < a:
		return math.MaxInt64
	case b < 0 && c > a:
		return math.MinInt64
	}
	return c
}

// findColumn returns the index of the one field named name, or -1.
func findColumn(schema *arrow.Schema, name string) int {
	idx := schema.FieldIndices(name)
	if len(idx) != 1 {
		return -1
	}
	return idx[0]
}

// keyPairs resolves pairs of key columns of two inputs: each must exist
// once, have a supported key type and the same type as its partner, so that
// equal values encode (and hash to key groups) identically on both sides.
// what names the two sides in errors ("left"/"right", "stream"/"table").
func keyPairs(a, b *arrow.Schema, aKeys, bKeys []string, aName, bName string) (aCols, bCols []int, kinds []byte, err error) {
	if len(aKeys) == 0 {
		return nil, nil, nil, fmt.Errorf("no key columns: a join needs at least one %s key and one %s key", aName, bName)
	}
	if len(aKeys) != len(bKeys) {
		return nil, nil, nil, fmt.Errorf("%d %s keys (%s) but %d %s keys (%s): they pair up in order", len(aKeys), aName, strings.Join(aKeys, ", "), len(bKeys), bName, strings.Join(bKeys, ", "))
	}
	for i := range aKeys {
		ca, cb := findColumn(a, aKeys[i]), findColumn(b, bKeys[i])
		if ca < 0 {
			return nil, nil, nil, fmt.Errorf("%s key column %q not found (or ambiguous) in %s schema%s", aName, aKeys[i], aName, columnHint(aKeys[i], a))
		}
		if cb < 0 {
			return nil, nil, nil, fmt.Errorf("%s key column %q not found (or ambiguous) in %s schema%s", bName, bKeys[i], bName, columnHint(bKeys[i], b))
		}
		ta, tb := a.Field(ca).Type, b.Field(cb).Type
		if !arrow.TypeEqual(ta, tb) {
			return nil, nil, nil, fmt.Errorf("key %d: %s column %q is %s but %s column %q is %s; join keys must have identical types (cast one side in a projection before the join)", i+1, aName, aKeys[i], ta, bName, bKeys[i], tb)
		}
		aCols, bCols = append(aCols, ca), append(bCols, cb)
	}
	if kinds, err = keyKinds(a, aCols); err != nil {
		return nil, nil, nil, err
	}
	return aCols, bCols, kinds, nil
}

// outputFields returns the fields of a join's output: the left fields as
// they are, then the right fields (nullable when nullableRight), each right
// field whose name is taken by a field before it (or by a reserved name)
// renamed prefix+name. A clash that the prefix does not resolve is an error.
// leftName and rightName name the sides in errors.
func outputFields(left, right []arrow.Field, reserved []string, prefix string, nullableRight bool, leftName, rightName string) ([]arrow.Field, error) {
	taken := map[string]string{}
	for _, r := range reserved {
		taken[r] = "reserved"
	}
	out := make([]arrow.Field, 0, len(left)+len(right))
	for _, f := range left {
		if prev, ok := taken[f.Name]; ok {
			return nil, fmt.Errorf("%s column %q clashes with a %s output column of the same name; rename it in a projection before the join", leftName, f.Name, prev)
		}
		taken[f.Name] = leftName
		out = append(out, f)
	}
	for _, f := range right {
		name := f.Name
		if prev, ok := taken[name]; ok {
			renamed := prefix + name
			if prev2, ok := taken[renamed]; ok {
				return nil, fmt.Errorf("%s column %q clashes with a %s column, and its prefixed name %q with a %s column; choose another right prefix or rename it in a projection", rightName, name, prev, renamed, prev2)
			}
			name = renamed
		}
		taken[name] = rightName
		g := f
		g.Name = name
		if nullableRight {
			g.Nullable = true
		}
		out = append(out, g)
	}
	return out, nil
}
