package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/avro"
)

// AvroValues decodes record values written in Avro's binary encoding with
// one writer schema (a record), bare or in the Confluent wire format
// (magic byte 0, a 4-byte schema id, the Avro datum), into one JSON
// object each: the JSON-lines decoder then reads them like any value.
type AvroValues struct {
	schema    *avro.Schema
	confluent bool
	fields    []string // the record's field names, in schema order
}

// NewAvroValues parses schema (Avro JSON; its top level is a record).
func NewAvroValues(schema string, confluent bool) (*AvroValues, error) {
	s, err := avro.Parse(schema)
	if err != nil {
		return nil, fmt.Errorf("avro schema: %w", err)
	}
	root := s.Root()
	if root.Type != "record" {
		return nil, fmt.Errorf("avro schema: the top level is %s; a record value's schema is a record", root.Type)
	}
	a := &AvroValues{schema: s, confluent: confluent}
	for _, f := range root.Fields {
		a.fields = append(a.fields, f.Name)
	}
	return a, nil
}

// AppendJSON appends value, decoded, as one JSON object on one line.
// Timestamps (timestamp-millis, -micros, local-…) and dates are written as
// RFC 3339 strings, bytes and fixed as strings (invalid UTF-8 as U+FFFD),
// unions as their branch's value, decimals as exact decimal numbers;
// NaN and infinite floats, a truncated datum and bytes after it are
// errors.
func (a *AvroValues) AppendJSON(dst, value []byte) ([]byte, error) {
	if a.confluent {
		if len(value) < 5 || value[0] != 0 {
			return dst, errors.New("not in the Confluent wire format (magic byte 0 and a 4-byte schema id)")
		}
		value = value[5:]
	}
	var v any
	rest, err := a.schema.Decode(value, &v)
	if err != nil {
		return dst, fmt.Errorf("invalid Avro datum: %w", err)
	}
	if len(rest) > 0 {
		return dst, fmt.Errorf("invalid Avro datum: %d bytes after the record", len(rest))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return dst, fmt.Errorf("invalid Avro datum: decoded to %T, not a record", v)
	}
	start := len(dst)
	dst = append(dst, '{')
	for i, f := range a.fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, f)
		dst = append(dst, ':')
		if dst, err = appendAvroJSON(dst, m[f]); err != nil {
			return dst[:start], fmt.Errorf("field %s: %w", f, err)
		}
	}
	return append(dst, '}'), nil
}

func appendAvroJSON(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case float32:
		return appendFloat(dst, float64(x), 32)
	case float64:
		return appendFloat(dst, x, 64)
	case string:
		return appendString(dst, x), nil
	case []byte:
		return appendString(dst, string(x)), nil
	case time.Time:
		return appendString(dst, x.UTC().Format(time.RFC3339Nano)), nil
	case *big.Rat:
		if x.IsInt() {
			return append(dst, x.Num().String()...), nil
		}
		// An exact decimal when the denominator divides a power of ten.
		for prec := 1; prec <= 38; prec++ {
			s := x.FloatString(prec)
			if r, ok := new(big.Rat).SetString(s); ok && r.Cmp(x) == 0 {
				return append(dst, s...), nil
			}
		}
		return append(dst, x.FloatString(18)...), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = appendAvroJSON(dst, x[k]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendAvroJSON(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	}
	// Anything else (a duration, a UUID type): its JSON form.
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	if bytes.ContainsAny(b, "\r\n") {
		return dst, fmt.Errorf("value %T has no one-line JSON form", v)
	}
	return append(dst, b...), nil
}

func appendFloat(dst []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("%v has no JSON number", f)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits), nil
}

// appendString appends s quoted for JSON, invalid UTF-8 as U+FFFD.
func appendString(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\ufffd")
	}
	b, _ := json.Marshal(s) // a valid string always marshals
	return append(dst, b...)
}
