package formats

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var fuzzFields = []Field{{"s", "string"}, {"i", "int64"}, {"i32", "int32"}, {"f", "float64"},
	{"b", "bool"}, {"t", "timestamp"}, {"ms", "timestamp_ms"}, {"é", "string"}}

// refValue converts a value decoded by encoding/json (UseNumber) the way the
// JSON-lines decoder must. ok=false means the row must be rejected.
func refValue(k kind, v any) (any, bool) {
	if v == nil {
		return nil, true
	}
	switch k {
	case kString:
		switch v := v.(type) {
		case string:
			return v, true
		case json.Number:
			return string(v), true
		case bool:
			return strconv.FormatBool(v), true
		}
		return nil, false
	case kInt64, kInt32:
		var n int64
		switch v := v.(type) {
		case json.Number:
			r, ok := new(big.Rat).SetString(string(v))
			if !ok || !r.IsInt() || !r.Num().IsInt64() {
				return nil, false
			}
			n = r.Num().Int64()
		case string:
			var e intErr
			if n, e = parseInt([]byte(v)); e != intOK {
				return nil, false
			}
		default:
			return nil, false
		}
		if k == kInt32 {
			if int64(int32(n)) != n {
				return nil, false
			}
			return int32(n), true
		}
		return n, true
	case kFloat64:
		var s string
		switch v := v.(type) {
		case json.Number:
			s = string(v)
		case string:
			s = v
		default:
			return nil, false
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil
	case kBool:
		switch v := v.(type) {
		case bool:
			return v, true
		case string:
			b, err := strconv.ParseBool(v)
			return b, err == nil
		}
		return nil, false
	case kTimestamp:
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		us, ok := parseTimestamp([]byte(s))
		return time.UnixMicro(us).UTC(), ok
	case kTimestampMS:
		var s string
		switch v := v.(type) {
		case json.Number:
			s = string(v)
		case string:
			s = v
		default:
			return nil, false
		}
		us, ok := parseEpoch([]byte(s), 1000)
		return time.UnixMicro(us).UTC(), ok
	}
	return nil, false
}

// refRow decodes one line with encoding/json. accepted=false: must reject.
// Every occurrence of a declared key must convert (the decoder rejects at the
// first bad one; encoding/json would let a later duplicate win), and a JSON
// string of a declared column must be strictly valid UTF-8, where
// encoding/json substitutes U+FFFD. A key that is not valid UTF-8 names no
// column.
func refRow(line []byte) (row []any, accepted, blank bool) {
	if len(bytes.Trim(line, " \t\r\n")) == 0 {
		return nil, false, true
	}
	if !json.Valid(line) || bytes.TrimLeft(line, " \t\r\n")[0] != '{' {
		return nil, false, false
	}
	kinds := map[string]kind{}
	for _, f := range fuzzFields {
		kinds[f.Name] = kindNames[f.Type]
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // '{'
		return nil, false, false
	}
	m := map[string]any{}
	for dec.More() {
		from := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, false, false
		}
		rawKey := line[from:dec.InputOffset()]
		rawKey = rawKey[bytes.IndexByte(rawKey, '"'):]
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false, false
		}
		k, declared := kinds[tok.(string)]
		if !strictJSONString(rawKey) || !declared {
			continue
		}
		if raw[0] == '"' && !strictJSONString(raw) {
			return nil, false, false
		}
		vd := json.NewDecoder(bytes.NewReader(raw))
		vd.UseNumber()
		var v any
		if err := vd.Decode(&v); err != nil {
			return nil, false, false
		}
		if _, ok := refValue(k, v); !ok {
			return nil, false, false
		}
		m[tok.(string)] = v
	}
	for _, f := range fuzzFields {
		v, _ := refValue(kindNames[f.Type], m[f.Name])
		row = append(row, v)
	}
	return row, true, false
}

// strictJSONString reports whether a syntactically valid JSON string
// (quotes included) is valid UTF-8 with every \uD800-\uDFFF escape in a
// high-low pair.
func strictJSONString(s []byte) bool {
	if !utf8.Valid(s) {
		return false
	}
	hex := func(i int) uint64 {
		v, err := strconv.ParseUint(string(s[i:i+4]), 16, 32)
		if err != nil {
			panic(err)
		}
		return v
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		i++
		if s[i] != 'u' {
			continue
		}
		r := hex(i + 1)
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return false
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 >= len(s) || s[i+1] != '\\' || s[i+2] != 'u' {
				return false
			}
			if lo := hex(i + 3); lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 6
		}
	}
	return true
}

func sameRow(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		fa, aok := a[i].(float64)
		fb, bok := b[i].(float64)
		if aok && bok {
			if math.Float64bits(fa) != math.Float64bits(fb) && !(math.IsNaN(fa) && math.IsNaN(fb)) {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func FuzzDecodeJSONL(f *testing.F) {
	for _, s := range []string{
		`{"s":"a\"b\u00e9\ud83d\ude00","i":-1,"i32":5,"f":1.5e3,"b":true,"t":"2024-01-01T00:00:00Z","ms":1700000000000,"\u00e9":"x"}`,
		`{"i":1.0,"f":"NaN","b":"t","t":"2024-01-01 00:00:00.123+02:00","x":[{"y":[null,true,"}"]}],"ms":"12.5"}`,
		`{"i":1e2,"i32":2147483648}` + "\n" + `{"s":12.50}`,
		"{\"s\":\"\xff\\ud800\"}\r\n\n  {}",
		"{\"s\":\"ok\",\"s\":\"\\udc00\"}\n{\"\xff\":1,\"\\ud800\":{\"\xfe\":\"\xfd\"}}\n{\"\u00e9\":\"\\ud83d\\ude00\xc3\xa9\"}",
		`{"i":"abc","i":1}`, `{"s":"\ud800\u0041"}`, "{\"s\":\"\xc3\"}",
		`{"i":"abc"} {"a":1}`,
		`[1,2]`, `{"s":"x",}`, `{"i":-0.0e0}`, "\xEF\xBB\xBF{\"b\":false}",
		`{"i":01}`, `{"i":-}`, `{"i":-0,"i32":-2147483649}`, `{"i":123456789012345678901}`,
		`{"i":999999999999999999,"i32":2147483647}`, `{"i":9223372036854775807,"i32":1E3}`,
	} {
		f.Add([]byte(s))
	}
	schema, err := SchemaFromFields(fuzzFields)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode("jsonl", "f.jsonl", data, DecodeOptions{Schema: schema, Parallelism: 1})
		if err != nil {
			t.Fatalf("Decode error: %v", err)
		}
		defer d.Release()
		got := rows(d.Batches)
		var want [][]any
		var wantRejects []int64
		for n, line := range bytes.Split(stripBOM(data), []byte("\n")) {
			row, ok, blank := refRow(line)
			switch {
			case blank:
			case ok:
				want = append(want, row)
			default:
				wantRejects = append(wantRejects, int64(n+1))
			}
		}
		var gotRejects []int64
		for _, r := range d.Rejects {
			gotRejects = append(gotRejects, r.Line)
			if r.Reason == "" {
				t.Errorf("line %d: empty reject reason", r.Line)
			}
		}
		if !reflect.DeepEqual(gotRejects, wantRejects) {
			t.Fatalf("rejected lines %v, encoding/json says %v (%+v)", gotRejects, wantRejects, d.Rejects)
		}
		if len(got) != len(want) {
			t.Fatalf("got %d rows, want %d", len(got), len(want))
		}
		for i := range got {
			if !sameRow(got[i], want[i]) {
				t.Fatalf("row %d:\n got %#v\nwant %#v", i, got[i], want[i])
			}
		}
	})
}

// FuzzParseTimestamp checks every accepted timestamp against time.Parse.
func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2024-01-15T10:30:00Z", "2024-01-15 10:30:00.5", "1969-12-31T23:59:59.999999-07:30",
		"0001-01-01T00:00:00+0100", "2024-02-29T00:00:00+05", "9999-12-31t23:59:59.123456789z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		us, ok := parseTimestamp([]byte(s))
		// The minute cache never changes a result: not after parsing s
		// itself, nor after another minute, nor after a rejected value.
		for _, prime := range []string{s, "2024-01-15T10:30:00Z", s[:min(len(s), 17)] + "99"} {
			var c tsCache
			c.parse([]byte(prime))
			if us2, ok2 := c.parse([]byte(s)); us2 != us || ok2 != ok {
				t.Fatalf("%q after %q: cached parse gives %d %v, uncached %d %v", s, prime, us2, ok2, us, ok)
			}
		}
		if !ok {
			return
		}
		// Normalise to RFC 3339 for time.Parse.
		norm := []byte(strings.ToUpper(s))
		norm[10] = 'T'
		rest := string(norm[19:])
		frac := ""
		if strings.HasPrefix(rest, ".") {
			j := 1
			for j < len(rest) && isDigit(rest[j]) {
				j++
			}
			frac, rest = rest[:j], rest[j:]
		}
		switch {
		case rest == "":
			rest = "Z"
		case len(rest) == 3:
			rest += ":00"
		case len(rest) == 5:
			rest = rest[:3] + ":" + rest[3:]
		}
		if len(frac) > 10 {
			frac = frac[:10]
		}
		tt, err := time.Parse(time.RFC3339Nano, string(norm[:19])+frac+rest)
		if err != nil {
			t.Fatalf("accepted %q but time.Parse rejects the normalised form: %v", s, err)
		}
		if want := tt.Unix()*1e6 + int64(tt.Nanosecond()/1000); want != us {
			t.Fatalf("%q: got %d us, time.Parse says %d", s, us, want)
		}
	})
}

// refCSV reads data (no header; fields s string, n int64) with encoding/csv
// and returns the rows the decoder must keep and how many records, good or
// bad, there are.
func refCSV(data []byte) (want [][]any, records int) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return want, records
		}
		records++
		if err != nil || len(rec) != 2 || !utf8.ValidString(rec[0]) {
			continue
		}
		var n any
		if rec[1] != "" {
			v, e := parseInt([]byte(rec[1]))
			if e != intOK {
				continue
			}
			n = v
		}
		want = append(want, []any{rec[0], n})
	}
}
