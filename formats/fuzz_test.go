package formats

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
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
func refRow(line []byte) (row []any, accepted, blank bool) {
	if len(bytes.Trim(line, " \t\r\n")) == 0 {
		return nil, false, true
	}
	if !json.Valid(line) || bytes.TrimLeft(line, " \t\r\n")[0] != '{' {
		return nil, false, false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, false, false
	}
	for _, f := range fuzzFields {
		k := kindNames[f.Type]
		v, ok := refValue(k, m[f.Name])
		if !ok {
			return nil, false, false
		}
		row = append(row, v)
	}
	return row, true, false
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
		`{"i":"abc"} {"a":1}`,
		`[1,2]`, `{"s":"x",}`, `{"i":-0.0e0}`, "\xEF\xBB\xBF{\"b\":false}",
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
