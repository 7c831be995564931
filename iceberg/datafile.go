package iceberg

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/iceberg-go"
)

// icebergSchema converts an Arrow schema of flat columns to an Iceberg schema
// with fresh field IDs 1..n; timestamps become timestamptz (a timestamp
// without a zone is taken as UTC; floe writes timestamp[us, UTC]).
func icebergSchema(sc *arrow.Schema) (*iceberg.Schema, error) {
	fields := make([]iceberg.NestedField, 0, sc.NumFields())
	for i, f := range sc.Fields() {
		var t iceberg.Type
		switch at := f.Type.(type) {
		case *arrow.BooleanType:
			t = iceberg.PrimitiveTypes.Bool
		case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Uint8Type, *arrow.Uint16Type:
			t = iceberg.PrimitiveTypes.Int32
		case *arrow.Int64Type, *arrow.Uint32Type:
			t = iceberg.PrimitiveTypes.Int64
		case *arrow.Float32Type:
			t = iceberg.PrimitiveTypes.Float32
		case *arrow.Float64Type:
			t = iceberg.PrimitiveTypes.Float64
		case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
			t = iceberg.PrimitiveTypes.String
		case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType:
			t = iceberg.PrimitiveTypes.Binary
		case *arrow.Date32Type:
			t = iceberg.PrimitiveTypes.Date
		case *arrow.Decimal128Type:
			t = iceberg.DecimalTypeOf(int(at.Precision), int(at.Scale))
		case *arrow.TimestampType:
			if at.TimeZone != "" && at.TimeZone != "UTC" && at.TimeZone != "+00:00" && at.TimeZone != "Etc/UTC" {
				return nil, fmt.Errorf("schema: column %q: timestamp zone %q, want UTC", f.Name, at.TimeZone)
			}
			t = iceberg.PrimitiveTypes.TimestampTz
		default:
			return nil, fmt.Errorf("schema: column %q: Arrow type %s has no Iceberg type in floe's table sink", f.Name, f.Type)
		}
		fields = append(fields, iceberg.NestedField{ID: i + 1, Name: f.Name, Type: t, Required: !f.Nullable})
	}
	return iceberg.NewSchema(0, fields...), nil
}

// Bounds of string and binary columns are truncated to this many characters
// (bytes), as Iceberg's default metrics mode truncate(16) does.
const boundTruncate = 16

// dataFileFromParquet builds the manifest record of a Parquet data file from
// its footer: record count, column sizes, value and null counts, lower and
// upper bounds, split offsets and (for a partitioned table) the partition
// value, which every row must share. Columns are matched to the table schema
// by name (floe's files carry no field IDs; the table's name mapping says
// the same).
func dataFileFromParquet(data []byte, filePath string, sc *iceberg.Schema, spec iceberg.PartitionSpec) (df iceberg.DataFile, err error) {
	defer func() {
		if r := recover(); r != nil {
			df, err = nil, fmt.Errorf("read Parquet footer: %v", r)
		}
	}()
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("read Parquet footer: %w", err)
	}
	defer rdr.Close()
	md := rdr.MetaData()
	ids, err := matchColumns(md.Schema, sc)
	if err != nil {
		return nil, err
	}
	var (
		sizes, values, nulls = map[int]int64{}, map[int]int64{}, map[int]int64{}
		lower, upper         = map[int]iceberg.Literal{}, map[int]iceberg.Literal{}
		noBounds, noNulls    = map[int]bool{}, map[int]bool{}
		splits               []int64
	)
	for rg := range md.NumRowGroups() {
		g := md.RowGroup(rg)
		for c := range g.NumColumns() {
			cc, err := g.ColumnChunk(c)
			if err != nil {
				return nil, fmt.Errorf("row group %d column %d: %w", rg, c, err)
			}
			if c == 0 {
				off := cc.DataPageOffset()
				if cc.HasDictionaryPage() && cc.DictionaryPageOffset() < off {
					off = cc.DictionaryPageOffset()
				}
				splits = append(splits, off)
			}
			id := ids[c]
			sizes[id] += cc.TotalCompressedSize()
			values[id] += cc.NumValues()
			set, err := cc.StatsSet()
			var st metadata.TypedStatistics
			if err == nil && set {
				st, err = cc.Statistics()
			}
			if err != nil || st == nil {
				noNulls[id], noBounds[id] = true, true
				continue
			}
			if st.HasNullCount() {
				nulls[id] += st.NullCount()
			} else {
				noNulls[id] = true
			}
			f, _ := sc.FindFieldByID(id)
			lo, hi, ok := literalBounds(st, md.Schema.Column(c), f.Type)
			if !ok {
				// A chunk without bounds (only nulls, or a type floe does not
				// bound) makes the file's bounds unknown, unless every value
				// of the chunk is null.
				if !(st.HasNullCount() && st.NullCount() == cc.NumValues()) {
					noBounds[id] = true
				}
				continue
			}
			if cur, ok := lower[id]; !ok || less(lo, cur) {
				lower[id] = lo
			}
			if cur, ok := upper[id]; !ok || less(cur, hi) {
				upper[id] = hi
			}
		}
	}
	partition := map[int]any{}
	for _, pf := range spec.Fields() {
		if !pf.Transform.PreservesOrder() {
			return nil, fmt.Errorf("partition field %s: transform %s: the partition value cannot be read from the footer", pf.Name, pf.Transform)
		}
		lo, okLo := lower[pf.SourceID()]
		hi, okHi := upper[pf.SourceID()]
		if noBounds[pf.SourceID()] || !okLo || !okHi {
			if values[pf.SourceID()] > 0 && nulls[pf.SourceID()] == values[pf.SourceID()] && !noNulls[pf.SourceID()] {
				partition[pf.FieldID] = nil
				continue
			}
			return nil, fmt.Errorf("partition field %s: the footer has no bounds for its source column", pf.Name)
		}
		if nulls[pf.SourceID()] > 0 || noNulls[pf.SourceID()] {
			return nil, fmt.Errorf("partition field %s: the file holds null and non-null values of its source column", pf.Name)
		}
		l := pf.Transform.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: lo})
		h := pf.Transform.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: hi})
		if !l.Valid || !h.Valid {
			return nil, fmt.Errorf("partition field %s: transform %s of %s..%s failed", pf.Name, pf.Transform, lo, hi)
		}
		if !l.Val.Equals(h.Val) {
			return nil, fmt.Errorf("partition field %s: the file holds rows of more than one partition (%s .. %s); each data file must hold rows of one partition",
				pf.Name, pf.Transform.ToHumanStr(l.Val.Any()), pf.Transform.ToHumanStr(h.Val.Any()))
		}
		partition[pf.FieldID] = l.Val.Any()
	}
	lowerB, upperB := map[int][]byte{}, map[int][]byte{}
	for id, lo := range lower {
		hi := upper[id]
		if noBounds[id] {
			continue
		}
		lb, err1 := truncLower(lo).MarshalBinary()
		if err1 == nil {
			lowerB[id] = lb
		}
		if h, ok := truncUpper(hi); ok {
			if ub, err2 := h.MarshalBinary(); err2 == nil {
				upperB[id] = ub
			}
		}
	}
	for id := range noNulls {
		delete(nulls, id)
	}
	b, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentData, filePath, iceberg.ParquetFile,
		partition, nil, nil, md.NumRows, int64(len(data)))
	if err != nil {
		return nil, err
	}
	b.ColumnSizes(sizes).ValueCounts(values).NullValueCounts(nulls).
		LowerBoundValues(lowerB).UpperBoundValues(upperB).SplitOffsets(splits)
	return b.Build(), nil
}

// matchColumns maps each Parquet leaf column to the table field of the same
// name and checks its physical type; every required table field must be in
// the file.
func matchColumns(ps *schema.Schema, sc *iceberg.Schema) ([]int, error) {
	ids := make([]int, ps.NumColumns())
	seen := map[int]bool{}
	for i := range ps.NumColumns() {
		col := ps.Column(i)
		path := col.ColumnPath()
		if len(path) != 1 {
			return nil, fmt.Errorf("column %s: nested columns are not supported by floe's table sink", strings.Join(path, "."))
		}
		f, ok := sc.FindFieldByName(path[0])
		if !ok {
			return nil, fmt.Errorf("column %q is not in the table schema", path[0])
		}
		if !physicalTypeFits(f.Type, col.PhysicalType()) {
			return nil, fmt.Errorf("column %q is %s in the file, the table has %s", path[0], col.PhysicalType(), f.Type)
		}
		ids[i] = f.ID
		seen[f.ID] = true
	}
	for _, f := range sc.Fields() {
		if f.Required && !seen[f.ID] {
			return nil, fmt.Errorf("required column %q is not in the file", f.Name)
		}
	}
	return ids, nil
}

// physicalTypeFits reports whether a Parquet column of physical type pt can
// hold values of Iceberg type t.
func physicalTypeFits(t iceberg.Type, pt parquet.Type) bool {
	switch t.(type) {
	case iceberg.BooleanType:
		return pt == parquet.Types.Boolean
	case iceberg.Int32Type, iceberg.DateType:
		return pt == parquet.Types.Int32
	case iceberg.Int64Type, iceberg.TimestampTzType, iceberg.TimestampType:
		return pt == parquet.Types.Int64
	case iceberg.Float32Type:
		return pt == parquet.Types.Float
	case iceberg.Float64Type:
		return pt == parquet.Types.Double
	case iceberg.StringType, iceberg.BinaryType:
		return pt == parquet.Types.ByteArray
	case iceberg.DecimalType:
		return pt == parquet.Types.Int32 || pt == parquet.Types.Int64 || pt == parquet.Types.FixedLenByteArray || pt == parquet.Types.ByteArray
	}
	return false
}

// literalBounds returns a chunk's min and max as literals of the column's
// Iceberg type, when floe can state them exactly: signed integers,
// floating point (no NaN), booleans, dates, microsecond timestamps, strings
// and binary. Unsigned and decimal columns get no bounds.
func literalBounds(st metadata.TypedStatistics, col *schema.Column, t iceberg.Type) (lo, hi iceberg.Literal, ok bool) {
	if !st.HasMinMax() {
		return nil, nil, false
	}
	if it, isInt := col.LogicalType().(schema.IntLogicalType); isInt && !it.IsSigned() {
		return nil, nil, false
	}
	switch s := st.(type) {
	case *metadata.BooleanStatistics:
		if _, ok := t.(iceberg.BooleanType); ok {
			return iceberg.NewLiteral(s.Min()), iceberg.NewLiteral(s.Max()), true
		}
	case *metadata.Int32Statistics:
		switch t.(type) {
		case iceberg.Int32Type:
			return iceberg.NewLiteral(s.Min()), iceberg.NewLiteral(s.Max()), true
		case iceberg.DateType:
			return iceberg.NewLiteral(iceberg.Date(s.Min())), iceberg.NewLiteral(iceberg.Date(s.Max())), true
		}
	case *metadata.Int64Statistics:
		switch t.(type) {
		case iceberg.Int64Type:
			return iceberg.NewLiteral(s.Min()), iceberg.NewLiteral(s.Max()), true
		case iceberg.TimestampTzType, iceberg.TimestampType:
			ts, isTS := col.LogicalType().(schema.TimestampLogicalType)
			if !isTS {
				return nil, nil, false
			}
			var mul, div int64 = 1, 1
			switch ts.TimeUnit() {
			case schema.TimeUnitMillis:
				mul = 1000
			case schema.TimeUnitMicros:
			case schema.TimeUnitNanos:
				div = 1000
			default:
				return nil, nil, false
			}
			conv := func(v int64) iceberg.Literal {
				return iceberg.NewLiteral(iceberg.Timestamp(floorDiv(v, div) * mul))
			}
			return conv(s.Min()), conv(s.Max()), true
		}
	case *metadata.Float32Statistics:
		if _, ok := t.(iceberg.Float32Type); ok && s.Min() == s.Min() && s.Max() == s.Max() {
			return iceberg.NewLiteral(s.Min()), iceberg.NewLiteral(s.Max()), true
		}
	case *metadata.Float64Statistics:
		if _, ok := t.(iceberg.Float64Type); ok && s.Min() == s.Min() && s.Max() == s.Max() {
			return iceberg.NewLiteral(s.Min()), iceberg.NewLiteral(s.Max()), true
		}
	case *metadata.ByteArrayStatistics:
		switch t.(type) {
		case iceberg.StringType:
			lo, hi := string(s.Min()), string(s.Max())
			if utf8.ValidString(lo) && utf8.ValidString(hi) {
				return iceberg.NewLiteral(lo), iceberg.NewLiteral(hi), true
			}
		case iceberg.BinaryType:
			return iceberg.NewLiteral(bytes.Clone(s.Min())), iceberg.NewLiteral(bytes.Clone(s.Max())), true
		}
	}
	return nil, nil, false
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// less compares two literals of one type.
func less(a, b iceberg.Literal) bool {
	switch a := a.(type) {
	case iceberg.BoolLiteral:
		return !bool(a) && bool(b.(iceberg.BoolLiteral))
	case iceberg.Int32Literal:
		return a < b.(iceberg.Int32Literal)
	case iceberg.Int64Literal:
		return a < b.(iceberg.Int64Literal)
	case iceberg.DateLiteral:
		return a < b.(iceberg.DateLiteral)
	case iceberg.TimestampLiteral:
		return a < b.(iceberg.TimestampLiteral)
	case iceberg.Float32Literal:
		return a < b.(iceberg.Float32Literal)
	case iceberg.Float64Literal:
		return a < b.(iceberg.Float64Literal)
	case iceberg.StringLiteral:
		return a < b.(iceberg.StringLiteral)
	case iceberg.BinaryLiteral:
		return bytes.Compare(a, b.(iceberg.BinaryLiteral)) < 0
	}
	return false
}

// truncLower truncates a string or binary lower bound (a prefix is <= the
// value).
func truncLower(l iceberg.Literal) iceberg.Literal {
	switch l := l.(type) {
	case iceberg.StringLiteral:
		if utf8.RuneCountInString(string(l)) > boundTruncate {
			return iceberg.NewLiteral(string([]rune(string(l))[:boundTruncate]))
		}
	case iceberg.BinaryLiteral:
		if len(l) > boundTruncate {
			return iceberg.NewLiteral([]byte(l[:boundTruncate]))
		}
	}
	return l
}

// truncUpper truncates a string or binary upper bound and increments its
// last character (byte) so it stays >= the value; ok is false when no such
// short bound exists.
func truncUpper(l iceberg.Literal) (iceberg.Literal, bool) {
	switch l := l.(type) {
	case iceberg.StringLiteral:
		r := []rune(string(l))
		if len(r) <= boundTruncate {
			return l, true
		}
		r = r[:boundTruncate]
		for i := len(r) - 1; i >= 0; i-- {
			next := r[i] + 1
			if next == 0xD800 { // skip the surrogate range
				next = 0xE000
			}
			if next <= utf8.MaxRune {
				r[i] = next
				return iceberg.NewLiteral(string(r[:i+1])), true
			}
		}
		return nil, false
	case iceberg.BinaryLiteral:
		if len(l) <= boundTruncate {
			return l, true
		}
		b := bytes.Clone(l[:boundTruncate])
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] < 0xff {
				b[i]++
				return iceberg.NewLiteral(b[:i+1]), true
			}
		}
		return nil, false
	}
	return l, true
}
