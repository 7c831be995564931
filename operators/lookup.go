package operators

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// LookupSpec declares a lookup join: every stream row is enriched with the
// columns of the table row whose key equals its key. The table is static
// for the operator's life (reading and versioning it is the caller's work).
type LookupSpec struct {
	ID         string   // operator id, used in errors
	Type       JoinType // InnerJoin drops stream rows without a table row; LeftJoin keeps them with nulls
	StreamKeys []string // paired in order with TableKeys; pairs must have identical types
	TableKeys  []string
	// RightPrefix renames a table column whose name a stream column has:
	// "name" becomes RightPrefix+"name". Empty means DefaultRightPrefix. If
	// the prefixed name is taken too, NewLookup fails.
	RightPrefix string
}

// Lookup is a stateless (not keyed, not checkpointed) lookup join against
// an in-memory hash table of a small table. Rules:
//
//   - the table's key must be unique: NewLookup fails on a duplicate key,
//     naming it and both rows (a dimension table with two rows for a key
//     is ambiguous; deduplicate it upstream);
//   - table rows with a null key column are skipped, and a stream row with
//     a null key column never matches (as SQL's =);
//   - the output is the stream columns, then the table's non-key columns
//     (renamed with the right prefix on a clash; nullable for a left
//     lookup), stream rows in their input order.
//
// Enrich may be called concurrently: the table is read-only after
// NewLookup.
type Lookup struct {
	spec       LookupSpec
	id         string
	stream     *arrow.Schema
	output     *arrow.Schema
	streamKeys []int
	kinds      []byte
	values     rowStore // the table's non-key columns, one chunk
	index      map[string]int32
	mem        memory.Allocator
}

// NewLookup validates spec against the stream schema and the table's
// schema (that of its batches, which must all have one schema; give at
// least one batch, possibly empty) and builds the hash table. The table's
// batches are copied: the caller may release them when NewLookup returns.
func NewLookup(spec LookupSpec, stream *arrow.Schema, table []arrow.RecordBatch) (*Lookup, error) {
	id := spec.ID
	if id == "" {
		id = "lookup"
	}
	fail := func(format string, args ...any) (*Lookup, error) {
		return nil, fmt.Errorf("lookup %s: "+format, append([]any{id}, args...)...)
	}
	if stream == nil {
		return fail("nil stream schema")
	}
	if spec.Type != InnerJoin && spec.Type != LeftJoin {
		return fail("unknown lookup type %v; expected inner or left", spec.Type)
	}
	if len(table) == 0 || table[0] == nil {
		return fail("no table batches: the table's schema is unknown (pass an empty batch for an empty table)")
	}
	ts := table[0].Schema()
	for i, b := range table {
		if b == nil || !sameFields(b.Schema(), ts) {
			return fail("table batch %d schema does not match batch 0 schema %s", i, ts)
		}
	}
	sCols, tCols, kinds, err := keyPairs(stream, ts, spec.StreamKeys, spec.TableKeys, "stream", "table")
	if err != nil {
		return fail("%v", err)
	}
	isKey := make([]bool, ts.NumFields())
	for _, c := range tCols {
		isKey[c] = true
	}
	var valFields []arrow.Field
	var valCols []int
	for c, f := range ts.Fields() {
		if !isKey[c] {
			valFields = append(valFields, f)
			valCols = append(valCols, c)
		}
	}
	prefix := spec.RightPrefix
	if prefix == "" {
		prefix = DefaultRightPrefix
	}
	fields, err := outputFields(stream.Fields(), valFields, nil, prefix, spec.Type == LeftJoin, "stream", "table")
	if err != nil {
		return fail("%v", err)
	}
	l := &Lookup{spec: spec, id: id, stream: stream, output: arrow.NewSchema(fields, nil), streamKeys: sCols,
		kinds: kinds, values: newRowStore(arrow.NewSchema(valFields, nil)), index: map[string]int32{}, mem: memory.DefaultAllocator}
	// Index every table row with a non-null key, then copy the indexed
	// rows' values into one chunk, row n of the chunk for index value n.
	type at struct{ batch, row int }
	var first []at
	var enc keyEncoder
	var buf []byte
	for bi, b := range table {
		kc := make([]arrow.Array, len(tCols))
		for i, c := range tCols {
			kc[i] = b.Column(c)
		}
		enc.bind(kinds, kc)
		for r := range int(b.NumRows()) {
			buf = enc.encode(buf[:0], r)
			if hasNullKey(buf, len(kinds)) {
				continue
			}
			if prev, dup := l.index[string(buf)]; dup {
				p := first[prev]
				return fail("duplicate table key (%s) in batch %d row %d and batch %d row %d; a lookup table must have one row per key",
					keyText(table[p.batch], p.row, tCols), p.batch, p.row, bi, r)
			}
			l.index[string(buf)] = int32(len(first))
			first = append(first, at{bi, r})
		}
	}
	byBatch := make([][]int32, len(table))
	for _, p := range first {
		byBatch[p.batch] = append(byBatch[p.batch], int32(p.row))
	}
	var parts []arrow.Array
	defer func() { releaseArrays(parts) }()
	cols := make([]arrow.Array, len(valCols))
	for vi, c := range valCols {
		parts = parts[:0]
		for bi, b := range table {
			rows := byBatch[bi]
			taken, err := takeArrays([]arrow.Array{b.Column(c)}, rows, l.values.mem)
			if err != nil {
				releaseArrays(cols)
				return fail("copy table column %q: %w", ts.Field(c).Name, err)
			}
			parts = append(parts, taken[0])
		}
		col, err := array.Concatenate(parts, l.values.mem)
		if err != nil {
			releaseArrays(cols)
			return fail("copy table column %q: %w", ts.Field(c).Name, err)
		}
		releaseArrays(parts)
		parts = parts[:0]
		cols[vi] = col
	}
	rec := array.NewRecordBatch(l.values.schema, cols, int64(len(first)))
	releaseArrays(cols)
	l.values.add(rec)
	return l, nil
}

// keyText renders the key columns of a row as name=value pairs.
func keyText(rec arrow.RecordBatch, row int, cols []int) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprintf("%s=%s", rec.Schema().Field(c).Name, rec.Column(c).ValueStr(row))
	}
	return strings.Join(parts, ", ")
}

// ID returns the lookup's operator id.
func (l *Lookup) ID() string { return l.id }

// OutputSchema is the schema of Enrich's batches.
func (l *Lookup) OutputSchema() *arrow.Schema { return l.output }

// Len is the number of table rows indexed.
func (l *Lookup) Len() int { return len(l.index) }

// SetAllocator makes Enrich allocate its batches from mem; nil restores
// memory.DefaultAllocator. Call it before Enrich.
func (l *Lookup) SetAllocator(mem memory.Allocator) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	l.mem = mem
}

// Enrich returns rec's rows (its schema must equal the stream schema) with
// the table columns of their key's table row: an inner lookup drops rows
// without one, a left lookup keeps them with null table columns. Rows keep
// their input order. The caller releases the batch.
func (l *Lookup) Enrich(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if rec == nil {
		return nil, fmt.Errorf("lookup %s: enrich: nil batch", l.id)
	}
	if !sameFields(rec.Schema(), l.stream) {
		return nil, fmt.Errorf("lookup %s: enrich: batch schema %s does not match stream schema %s", l.id, rec.Schema(), l.stream)
	}
	n := int(rec.NumRows())
	kc := make([]arrow.Array, len(l.streamKeys))
	for i, c := range l.streamKeys {
		kc[i] = rec.Column(c)
	}
	var enc keyEncoder
	enc.bind(l.kinds, kc)
	var buf []byte
	locs := make([]rowLoc, 0, n)
	var keep []int32
	for r := range n {
		buf = enc.encode(buf[:0], r)
		x, ok := l.index[string(buf)]
		switch {
		case ok:
			locs = append(locs, rowLoc{chunk: 0, idx: x})
			keep = append(keep, int32(r))
		case l.spec.Type == LeftJoin:
			locs = append(locs, nullLoc)
		}
	}
	var streamCols []arrow.Array
	if l.spec.Type == LeftJoin || len(keep) == n {
		for _, c := range rec.Columns() {
			c.Retain()
			streamCols = append(streamCols, c)
		}
	} else {
		var err error
		if streamCols, err = takeArrays(rec.Columns(), keep, l.mem); err != nil {
			return nil, fmt.Errorf("lookup %s: enrich: %w", l.id, err)
		}
	}
	defer func() { releaseArrays(streamCols) }()
	vals, err := l.values.gather(locs, l.mem)
	if err != nil {
		return nil, fmt.Errorf("lookup %s: enrich: %w", l.id, err)
	}
	defer releaseArrays(vals)
	cols := make([]arrow.Array, 0, len(streamCols)+len(vals))
	cols = append(append(cols, streamCols...), vals...)
	return array.NewRecordBatch(l.output, cols, int64(len(locs))), nil
}
