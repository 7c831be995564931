package expr

import (
	"github.com/apache/arrow-go/v18/arrow"
)

// kind is the evaluation type of a value. Columns of every integer width load as
// kInt (int64), float32 and float64 as kFloat (float64); kTimestamp keeps the
// column's unit and time zone in typ.
type kind uint8

const (
	kNull kind = iota // the type of the nil literal; unifies with every other type
	kBool
	kInt
	kFloat
	kString
	kTimestamp
)

// typ is the static type of an expression node.
type typ struct {
	k    kind
	unit arrow.TimeUnit // kTimestamp only
	tz   string         // kTimestamp only
}

var (
	tNull   = typ{k: kNull}
	tBool   = typ{k: kBool}
	tInt    = typ{k: kInt}
	tFloat  = typ{k: kFloat}
	tString = typ{k: kString}
)

func tTimestamp(unit arrow.TimeUnit, tz string) typ {
	return typ{k: kTimestamp, unit: unit, tz: tz}
}

func (t typ) numeric() bool { return t.k == kInt || t.k == kFloat }

// String names the type as error messages show it.
func (t typ) String() string {
	switch t.k {
	case kNull:
		return "null"
	case kBool:
		return "bool"
	case kInt:
		return "int64"
	case kFloat:
		return "float64"
	case kString:
		return "string"
	case kTimestamp:
		return "timestamp[" + t.unit.String() + "]"
	}
	return "invalid"
}

// arrowType is the Arrow type of an evaluated array of type t.
func (t typ) arrowType() arrow.DataType {
	switch t.k {
	case kBool:
		return arrow.FixedWidthTypes.Boolean
	case kInt:
		return arrow.PrimitiveTypes.Int64
	case kFloat:
		return arrow.PrimitiveTypes.Float64
	case kString:
		return arrow.BinaryTypes.String
	case kTimestamp:
		return &arrow.TimestampType{Unit: t.unit, TimeZone: t.tz}
	}
	return arrow.Null
}

// columnTyp maps an Arrow column type to its evaluation type. ok is false for
// types expressions cannot compute on (they can still be projected unchanged).
func columnTyp(dt arrow.DataType) (typ, bool) {
	switch dt.ID() {
	case arrow.BOOL:
		return tBool, true
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32:
		return tInt, true
	case arrow.FLOAT32, arrow.FLOAT64:
		return tFloat, true
	case arrow.STRING, arrow.LARGE_STRING:
		return tString, true
	case arrow.TIMESTAMP:
		ts := dt.(*arrow.TimestampType)
		return tTimestamp(ts.Unit, ts.TimeZone), true
	case arrow.NULL:
		return tNull, true
	}
	return typ{}, false
}

// unitFactor is the number of ticks of unit u in one second.
func unitFactor(u arrow.TimeUnit) int64 {
	switch u {
	case arrow.Second:
		return 1
	case arrow.Millisecond:
		return 1_000
	case arrow.Microsecond:
		return 1_000_000
	}
	return 1_000_000_000
}
