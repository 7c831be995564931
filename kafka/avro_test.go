package kafka

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"
)

const testAvroSchema = `{"type": "record", "name": "click", "fields": [
  {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "user", "type": ["null", "string"], "default": null},
  {"name": "bytes", "type": "long"},
  {"name": "ratio", "type": "double"},
  {"name": "ok", "type": "boolean"},
  {"name": "raw", "type": "bytes"},
  {"name": "tags", "type": {"type": "array", "items": "string"}},
  {"name": "kind", "type": {"type": "enum", "name": "kind", "symbols": ["A", "B"]}},
  {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}}
]}`

func encodeClick(t testing.TB, v map[string]any) []byte {
	t.Helper()
	data, err := avro.MustParse(testAvroSchema).Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func click(user any, ratio float64) map[string]any {
	return map[string]any{"ts": time.Date(2026, 3, 1, 12, 0, 1, 250e6, time.UTC), "user": user, "bytes": int64(42),
		"ratio": ratio, "ok": true, "raw": []byte("a\"b\xff"), "tags": []any{"x", "y"}, "kind": "B", "price": "12.34"}
}

func TestAvroValues(t *testing.T) {
	a, err := NewAvroValues(testAvroSchema, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.AppendJSON([]byte("prefix "), encodeClick(t, click("u1", 0.5)))
	if err != nil {
		t.Fatal(err)
	}
	want := `prefix {"ts":"2026-03-01T12:00:01.25Z","user":"u1","bytes":42,"ratio":0.5,"ok":true,"raw":"a\"b` + "\ufffd" + `","tags":["x","y"],"kind":"B","price":12.34}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// A null union branch is null.
	got, err = a.AppendJSON(nil, encodeClick(t, click(nil, 1)))
	if err != nil || !strings.Contains(string(got), `"user":null`) {
		t.Fatalf("null user: %s %v", got, err)
	}

	// The Confluent wire format: magic byte 0, schema id, datum.
	c, err := NewAvroValues(testAvroSchema, true)
	if err != nil {
		t.Fatal(err)
	}
	framed := append([]byte{0, 0, 0, 0, 7}, encodeClick(t, click("u2", 2))...)
	if got, err := c.AppendJSON(nil, framed); err != nil || !strings.Contains(string(got), `"user":"u2"`) {
		t.Fatalf("confluent: %s %v", got, err)
	}

	datum := encodeClick(t, click("u3", 1))
	for _, tc := range []struct {
		name  string
		a     *AvroValues
		value []byte
		want  string
	}{
		{"truncated", a, datum[:len(datum)-3], "invalid Avro datum"},
		{"trailing", a, append(append([]byte{}, datum...), 1, 2), "2 bytes after the record"},
		{"empty", a, nil, "invalid Avro datum"},
		{"nan", a, encodeClick(t, click("u", math.NaN())), "field ratio: NaN has no JSON number"},
		{"no-magic", c, datum, "not in the Confluent wire format"},
		{"short-frame", c, []byte{0, 1}, "not in the Confluent wire format"},
	} {
		out, err := tc.a.AppendJSON([]byte("keep"), tc.value)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if string(out) != "keep" {
			t.Errorf("%s: dst changed to %q on error", tc.name, out)
		}
	}

	for _, bad := range []string{`{"type": "string"}`, `{"type": "record"`, `{"type": "record", "name": "r", "fields": [{"name": "a", "type": "nope"}]}`} {
		if _, err := NewAvroValues(bad, false); err == nil || !strings.HasPrefix(err.Error(), "avro schema: ") {
			t.Errorf("schema %s: error %v", bad, err)
		}
	}
}

// FuzzAvroValues: any bytes either decode to one JSON object on one line
// or are an error; never a panic.
func FuzzAvroValues(f *testing.F) {
	f.Add(encodeClick(f, click("u1", 0.5)))
	f.Add(encodeClick(f, click(nil, -3)))
	f.Add([]byte{})
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	a, err := NewAvroValues(testAvroSchema, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		out, err := a.AppendJSON(nil, value)
		if err != nil {
			if len(out) != 0 {
				t.Fatalf("output %q with error %v", out, err)
			}
			return
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("output is not a JSON object: %v: %s", err, out)
		}
		if strings.ContainsAny(string(out), "\r\n") {
			t.Fatalf("output spans lines: %q", out)
		}
		if len(m) != 9 {
			t.Fatalf("output has %d fields, want 9: %s", len(m), out)
		}
	})
}
