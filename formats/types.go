// Package formats decodes input files (JSON lines, CSV, Parquet) into Arrow
// record batches and encodes record batches as Parquet or JSON lines.
//
// The package is pure: inputs are whole files as byte slices and outputs are
// bytes. It performs no I/O and imports neither the object store nor any
// cloud SDK.
//
// Contract of Decode:
//   - A per-row problem (bad JSON, missing or unparsable event time, a value
//     that does not fit its declared type, a wrong CSV field count) becomes a
//     Reject and never loses any other row.
//   - A per-file problem (not Parquet at all, a declared column missing from a
//     CSV header or a Parquet schema, an incompatible Parquet type) is an error
//     that names the file.
//   - Timestamps always come out as timestamp[us, tz=UTC].
//   - Every string that comes out is valid UTF-8, in every format: a row
//     whose value of a declared string column (CSV field, JSON string,
//     Parquet string value) is not valid UTF-8 is a Reject whose reason names
//     the column ("column "user_id": value is not valid UTF-8: ..."). Bad
//     bytes are never replaced by U+FFFD nor passed through. Columns the
//     schema does not declare are not read and not checked. In JSON lines a
//     lone surrogate escape (\ud800 not followed by a low surrogate) counts
//     as invalid UTF-8, and a key that is not valid UTF-8 names no column.
package formats

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// TypeMetadataKey is the arrow.Field metadata key under which SchemaFromFields
// records the declared type name of a column (for example "timestamp_ms").
// It tells the decoders how to read a timestamp column: as text ("timestamp")
// or as an integer epoch in a given unit.
const TypeMetadataKey = "floe.type"

// TimestampType is the Arrow type of every timestamp column floe produces.
var TimestampType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// DictStringType is dictionary<values=utf8, indices=int32>. A declared
// string field of this type is decoded from Parquet as dictionary-encoded
// strings: each batch carries a dictionary (which may hold values no row
// of the batch uses) and int32 indices into it. JSON lines and CSV reject a
// schema with such a field.
var DictStringType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// isDictString reports whether t is DictStringType.
func isDictString(t arrow.DataType) bool {
	d, ok := t.(*arrow.DictionaryType)
	return ok && d.IndexType.ID() == arrow.INT32 && d.ValueType.ID() == arrow.STRING && !d.Ordered
}

// Field is one declared column: a name and a type name accepted by ParseType.
type Field struct {
	Name string
	Type string
}

// kind is the decoding rule of one declared column.
type kind uint8

const (
	kString kind = iota
	kInt64
	kInt32
	kFloat64
	kBool
	kTimestamp   // text: RFC 3339 and friends
	kTimestampS  // integer (or decimal) epoch seconds
	kTimestampMS // epoch milliseconds
	kTimestampUS // epoch microseconds
)

var kindNames = map[string]kind{
	"string":       kString,
	"int64":        kInt64,
	"int32":        kInt32,
	"float64":      kFloat64,
	"bool":         kBool,
	"timestamp":    kTimestamp,
	"timestamp_s":  kTimestampS,
	"timestamp_ms": kTimestampMS,
	"timestamp_us": kTimestampUS,
}

func (k kind) String() string {
	for n, v := range kindNames {
		if v == k {
			return n
		}
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

func (k kind) isTimestamp() bool { return k >= kTimestamp }

func (k kind) arrowType() arrow.DataType {
	switch k {
	case kString:
		return arrow.BinaryTypes.String
	case kInt64:
		return arrow.PrimitiveTypes.Int64
	case kInt32:
		return arrow.PrimitiveTypes.Int32
	case kFloat64:
		return arrow.PrimitiveTypes.Float64
	case kBool:
		return arrow.FixedWidthTypes.Boolean
	default:
		return TimestampType
	}
}

// ParseType returns the Arrow type of a declared type name: string, int64,
// int32, float64, bool, timestamp, timestamp_s, timestamp_ms or timestamp_us.
// All timestamp names map to timestamp[us, tz=UTC]; they differ only in how
// the file spells the value (text versus an epoch number in a unit).
func ParseType(name string) (arrow.DataType, error) {
	k, ok := kindNames[strings.TrimSpace(name)]
	if !ok {
		return nil, fmt.Errorf("unknown type %q (want one of string, int64, int32, float64, bool, timestamp, timestamp_s, timestamp_ms, timestamp_us)", name)
	}
	return k.arrowType(), nil
}

// SchemaFromFields builds the Arrow schema of declared fields. Every field is
// nullable and carries its declared type name under TypeMetadataKey. Empty or
// duplicate names and unknown types are errors.
func SchemaFromFields(fields []Field) (*arrow.Schema, error) {
	if len(fields) == 0 {
		return nil, fmt.Errorf("schema: no fields")
	}
	seen := make(map[string]bool, len(fields))
	out := make([]arrow.Field, 0, len(fields))
	for _, f := range fields {
		if f.Name == "" {
			return nil, fmt.Errorf("schema: empty field name")
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("schema: duplicate field %q", f.Name)
		}
		seen[f.Name] = true
		name := strings.TrimSpace(f.Type)
		dt, err := ParseType(name)
		if err != nil {
			return nil, fmt.Errorf("schema: field %q: %w", f.Name, err)
		}
		out = append(out, arrow.Field{
			Name: f.Name, Type: dt, Nullable: true,
			Metadata: arrow.NewMetadata([]string{TypeMetadataKey}, []string{name}),
		})
	}
	return arrow.NewSchema(out, nil), nil
}

// FieldType returns the declared type name of f: its TypeMetadataKey metadata
// when present, else the name derived from its Arrow type. It fails for Arrow
// types that cannot be declared.
func FieldType(f arrow.Field) (string, error) {
	k, err := fieldKind(f)
	if err != nil {
		return "", err
	}
	return k.String(), nil
}

func fieldKind(f arrow.Field) (kind, error) {
	if f.Type != nil && f.Type.ID() == arrow.DICTIONARY {
		if !isDictString(f.Type) {
			return 0, fmt.Errorf("field %q: unsupported type %s (the only dictionary type is %s)", f.Name, f.Type, DictStringType)
		}
		if i := f.Metadata.FindKey(TypeMetadataKey); i >= 0 && f.Metadata.Values()[i] != "string" {
			return 0, fmt.Errorf("field %q: declared type %q does not match Arrow type %s", f.Name, f.Metadata.Values()[i], f.Type)
		}
		return kString, nil
	}
	if i := f.Metadata.FindKey(TypeMetadataKey); i >= 0 {
		k, ok := kindNames[f.Metadata.Values()[i]]
		if !ok {
			return 0, fmt.Errorf("field %q: unknown declared type %q", f.Name, f.Metadata.Values()[i])
		}
		if k.isTimestamp() != (f.Type.ID() == arrow.TIMESTAMP) {
			return 0, fmt.Errorf("field %q: declared type %q does not match Arrow type %s", f.Name, k, f.Type)
		}
		return k, nil
	}
	switch f.Type.ID() {
	case arrow.STRING:
		return kString, nil
	case arrow.INT64:
		return kInt64, nil
	case arrow.INT32:
		return kInt32, nil
	case arrow.FLOAT64:
		return kFloat64, nil
	case arrow.BOOL:
		return kBool, nil
	case arrow.TIMESTAMP:
		return kTimestamp, nil
	}
	return 0, fmt.Errorf("field %q: unsupported type %s", f.Name, f.Type)
}
