package formats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// EncodeJSONL writes one JSON object per row, fields in schema order.
// Timestamps become RFC 3339 UTC strings with up to nanosecond digits, nulls
// become null, NaN and ±Inf become the strings "NaN", "Infinity" and
// "-Infinity" (which the float64 decoder reads back). Supported column types:
// strings, signed and unsigned integers, floats, bool, timestamps, date32 and
// dictionaries of those.
func EncodeJSONL(schema *arrow.Schema, batches []arrow.RecordBatch) ([]byte, error) {
	if schema == nil {
		return nil, fmt.Errorf("encode jsonl: nil schema")
	}
	keys := make([][]byte, schema.NumFields())
	for i, f := range schema.Fields() {
		keys[i] = appendJSONString(nil, f.Name)
		keys[i] = append(keys[i], ':')
	}
	var buf []byte
	for n, b := range batches {
		if err := checkBatch(schema, b); err != nil {
			return nil, fmt.Errorf("encode jsonl: batch %d: %w", n, err)
		}
		cols := b.Columns()
		for r := 0; r < int(b.NumRows()); r++ {
			buf = append(buf, '{')
			for c, a := range cols {
				if c > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, keys[c]...)
				var err error
				if buf, err = appendJSONValue(buf, a, r); err != nil {
					return nil, fmt.Errorf("encode jsonl: column %q: %w", schema.Field(c).Name, err)
				}
			}
			buf = append(buf, '}', '\n')
		}
	}
	return buf, nil
}

func appendJSONValue(buf []byte, a arrow.Array, i int) ([]byte, error) {
	if a.IsNull(i) {
		return append(buf, "null"...), nil
	}
	switch a := a.(type) {
	case *array.String:
		return appendJSONString(buf, a.Value(i)), nil
	case *array.LargeString:
		return appendJSONString(buf, a.Value(i)), nil
	case *array.Int64:
		return strconv.AppendInt(buf, a.Value(i), 10), nil
	case *array.Int32:
		return strconv.AppendInt(buf, int64(a.Value(i)), 10), nil
	case *array.Int16:
		return strconv.AppendInt(buf, int64(a.Value(i)), 10), nil
	case *array.Int8:
		return strconv.AppendInt(buf, int64(a.Value(i)), 10), nil
	case *array.Uint64:
		return strconv.AppendUint(buf, a.Value(i), 10), nil
	case *array.Uint32:
		return strconv.AppendUint(buf, uint64(a.Value(i)), 10), nil
	case *array.Uint16:
		return strconv.AppendUint(buf, uint64(a.Value(i)), 10), nil
	case *array.Uint8:
		return strconv.AppendUint(buf, uint64(a.Value(i)), 10), nil
	case *array.Float64:
		return appendFloat(buf, a.Value(i), 64), nil
	case *array.Float32:
		return appendFloat(buf, float64(a.Value(i)), 32), nil
	case *array.Boolean:
		return strconv.AppendBool(buf, a.Value(i)), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		t := a.Value(i).ToTime(unit).UTC()
		buf = append(buf, '"')
		buf = t.AppendFormat(buf, time.RFC3339Nano)
		return append(buf, '"'), nil
	case *array.Date32:
		buf = append(buf, '"')
		buf = a.Value(i).ToTime().UTC().AppendFormat(buf, time.DateOnly)
		return append(buf, '"'), nil
	case *array.Dictionary:
		return appendJSONValue(buf, a.Dictionary(), a.GetValueIndex(i))
	}
	return nil, fmt.Errorf("unsupported type %s", a.DataType())
}

// appendFloat formats like encoding/json; non-finite values become strings.
func appendFloat(buf []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(buf, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(buf, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(buf, `"-Infinity"`...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	return strconv.AppendFloat(buf, f, format, -1, bits)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD;
// control characters are escaped; nothing else is (no HTML escaping).
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// EncodeRejects writes rejects as JSON lines {"file","line","reason","raw"}.
func EncodeRejects(rejects []Reject) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range rejects {
		if err := enc.Encode(&rejects[i]); err != nil {
			return nil, fmt.Errorf("encode rejects: %w", err)
		}
	}
	return buf.Bytes(), nil
}
