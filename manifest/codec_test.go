package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	l, g, m := validLatest(), validGeneration(), validManifest()
	lb, err := EncodeLatest(l)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := EncodeGeneration(g)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := EncodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := DecodeLatest(LatestPath, lb)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := DecodeGeneration(GenerationPath(3), gb)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := DecodeManifest(ManifestPath(3, 41), mb)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		a, b any
	}{{"latest", l, l2}, {"generation", g, g2}, {"manifest", m, m2}} {
		if !reflect.DeepEqual(c.a, c.b) {
			t.Errorf("%s round trip:\n got %+v\nwant %+v", c.name, c.b, c.a)
		}
	}
	// Encoding is deterministic and human-readable.
	mb2, _ := EncodeManifest(m2)
	if !bytes.Equal(mb, mb2) {
		t.Error("re-encoding a decoded manifest changed its bytes")
	}
	if !bytes.HasSuffix(mb, []byte("}\n")) || !bytes.Contains(mb, []byte("\n  \"pipeline\": \"clicks-per-user\",\n")) {
		t.Errorf("manifest is not indented JSON with a trailing newline:\n%s", mb)
	}
	if bytes.Contains(mb, []byte(`\u003c`)) || bytes.Contains(mb, []byte(`\u0026`)) {
		t.Error("encoder escapes HTML")
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	m := validManifest()
	m.Operators[0].Files[1].Path = "../x"
	_, err := EncodeManifest(m)
	wantFieldErr(t, err, "operators[0].files[1].path", "encode: manifest: field operators[0].files[1].path")
	l := validLatest()
	l.Epoch = 40
	_, err = EncodeLatest(l)
	wantFieldErr(t, err, "manifest", "does not match")
	g := validGeneration()
	g.Parallelism = 0
	_, err = EncodeGeneration(g)
	wantFieldErr(t, err, "parallelism")
}

// mutateJSON decodes the valid manifest into a generic tree, lets f edit
// it, and re-encodes it.
func mutateJSON(t *testing.T, doc any, f func(map[string]any)) []byte {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep int64 values exact
	if err := dec.Decode(&tree); err != nil {
		t.Fatal(err)
	}
	f(tree)
	out, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func at(tree map[string]any, path ...any) map[string]any {
	var cur any = tree
	for _, p := range path {
		switch k := p.(type) {
		case string:
			cur = cur.(map[string]any)[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	return cur.(map[string]any)
}

func TestDecodeManifestStrict(t *testing.T) {
	name := ManifestPath(3, 41)
	valid, err := EncodeManifest(validManifest())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		data  []byte
		field string
		frag  string
	}{
		{"unknown top-level field", mutateJSON(t, validManifest(), func(m map[string]any) { m["extra"] = 1 }), "extra", "unknown field"},
		{"unknown nested field", mutateJSON(t, validManifest(), func(m map[string]any) { at(m, "operators", 1, "files", 0)["etag"] = "x" }),
			"operators[1].files[0].etag", "unknown field"},
		{"case-mismatched field", mutateJSON(t, validManifest(), func(m map[string]any) {
			delete(m, "pipeline")
			m["Pipeline"] = "clicks-per-user"
		}), "Pipeline", "unknown field"},
		{"missing top-level field", mutateJSON(t, validManifest(), func(m map[string]any) { delete(m, "counters") }), "counters", "missing"},
		{"missing nested field", mutateJSON(t, validManifest(), func(m map[string]any) { delete(at(m, "operators", 1, "files", 0), "checksum") }),
			"operators[1].files[0].checksum", "missing"},
		{"missing counter", mutateJSON(t, validManifest(), func(m map[string]any) { delete(at(m, "counters"), "rows_late") }),
			"counters.rows_late", "missing"},
		{"missing input field", mutateJSON(t, validManifest(), func(m map[string]any) { delete(at(m, "source", "inputs", "events"), "last_active") }),
			`source.inputs["events"].last_active`, "missing"},
		{"missing version", mutateJSON(t, validManifest(), func(m map[string]any) { delete(m, "format_version") }), "format_version", "missing"},
		{"newer version with new fields", mutateJSON(t, validManifest(), func(m map[string]any) { m["format_version"] = 3; m["shiny"] = true }),
			"format_version", "unsupported format version 3 (this release reads 1 to 2)"},
		{"version as string", mutateJSON(t, validManifest(), func(m map[string]any) { m["format_version"] = "1" }), "format_version", `want an integer, got string "1"`},
		{"version as float", bytes.Replace(valid, []byte(`"format_version": 2,`), []byte(`"format_version": 2.0,`), 1), "format_version", "want an integer"},
		{"string for int", mutateJSON(t, validManifest(), func(m map[string]any) { at(m, "operators", 0, "files", 1)["size"] = "12" }),
			"operators[0].files[1].size", `want an integer, got string "12"`},
		{"fraction", mutateJSON(t, validManifest(), func(m map[string]any) { at(m, "counters")["rows_in"] = 1.5 }), "counters.rows_in", "1.5 is not an integer"},
		{"exponent", bytes.Replace(valid, []byte(`"rows_in": 100,`), []byte(`"rows_in": 1e2,`), 1), "counters.rows_in", "not an integer"},
		{"int overflow", bytes.Replace(valid, []byte(`"rows_in": 100,`), []byte(`"rows_in": 9223372036854775808,`), 1), "counters.rows_in", "not an integer in the range"},
		{"null string", mutateJSON(t, validManifest(), func(m map[string]any) { m["pipeline"] = nil }), "pipeline", "want a string, got null"},
		{"null struct", mutateJSON(t, validManifest(), func(m map[string]any) { m["counters"] = nil }), "counters", "want an object, got null"},
		{"object for array", mutateJSON(t, validManifest(), func(m map[string]any) { m["outputs"] = map[string]any{} }), "outputs", "want an array, got an object"},
		{"array for object", mutateJSON(t, validManifest(), func(m map[string]any) { m["source"] = []any{} }), "source", "want an object, got an array"},
		{"bad time", mutateJSON(t, validManifest(), func(m map[string]any) { m["created_at"] = "yesterday" }), "created_at", "not an RFC 3339 time"},
		{"number time", mutateJSON(t, validManifest(), func(m map[string]any) { m["created_at"] = 5 }), "created_at", "want an RFC 3339 time string"},
		{"invalid value after decode", mutateJSON(t, validManifest(), func(m map[string]any) { at(m, "operators", 0, "files", 1)["path"] = "../x" }),
			"operators[0].files[1].path", `manifest gen=000003/epoch=0000000041/_manifest.json: field operators[0].files[1].path: "../x" escapes the pipeline root`},
		{"duplicate field", bytes.Replace(valid, []byte(`"epoch": 41,`), []byte(`"epoch": 41, "epoch": 42,`), 1), "epoch", "duplicate field"},
		{"duplicate map key", bytes.Replace(valid, []byte(`"inputs": {`), []byte(`"inputs": {"events": {"max_event_time_us": 1, "last_active": "2026-01-01T00:00:00Z"},`), 1),
			`source.inputs["events"]`, "duplicate key"},
		{"trailing object", append(append([]byte{}, valid...), []byte("{}")...), "", "trailing data"},
		{"trailing garbage", append(append([]byte{}, valid...), 'x'), "", "trailing data"},
		{"truncated", valid[:len(valid)/2], "", "unexpected end of input"},
		{"empty", nil, "", "unexpected end of input"},
		{"syntax error", []byte(`{"format_version": 1,,}`), "", "invalid JSON at byte"},
		{"not an object", []byte(`[1]`), "", "want a JSON object, got an array"},
		{"null document", []byte(`null`), "", "want a JSON object, got null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeManifest(name, tt.data)
			if m != nil {
				t.Errorf("got a manifest with an error")
			}
			wantFieldErr(t, err, tt.field, "manifest "+name+": ", tt.frag)
		})
	}
}

func TestDecodeLatestAndGenerationStrict(t *testing.T) {
	lb, _ := EncodeLatest(validLatest())
	gb, _ := EncodeGeneration(validGeneration())
	if _, err := DecodeLatest(LatestPath, lb); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeGeneration(GenerationPath(3), gb); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		decode func([]byte) error
		data   []byte
		field  string
		frag   string
	}{
		{"latest unknown field", decLatest, mutateJSON(t, validLatest(), func(m map[string]any) { m["etag"] = "x" }), "etag", "latest pointer _latest.json: field etag: unknown field"},
		{"latest missing attempt", decLatest, mutateJSON(t, validLatest(), func(m map[string]any) { delete(m, "attempt") }), "attempt", "missing"},
		{"latest wrong manifest", decLatest, mutateJSON(t, validLatest(), func(m map[string]any) { m["epoch"] = 42 }), "manifest", "does not match"},
		{"latest version", decLatest, mutateJSON(t, validLatest(), func(m map[string]any) { m["format_version"] = 7 }), "format_version", "unsupported format version 7"},
		{"latest trailing", decLatest, append(append([]byte{}, lb...), "[]"...), "", "trailing data"},
		{"generation unknown plan field", decGeneration, mutateJSON(t, validGeneration(), func(m map[string]any) { at(m, "plan", 1)["extra"] = 1 }),
			"plan[1].extra", "generation gen=000003/_generation.json: field plan[1].extra: unknown field"},
		{"generation missing parent", decGeneration, mutateJSON(t, validGeneration(), func(m map[string]any) { delete(m, "parent") }), "parent", "missing"},
		{"generation parent missing epoch", decGeneration, mutateJSON(t, validGeneration(), func(m map[string]any) { delete(at(m, "parent"), "epoch") }), "parent.epoch", "missing"},
		{"generation bool for int", decGeneration, mutateJSON(t, validGeneration(), func(m map[string]any) { m["parallelism"] = true }), "parallelism", "got boolean true"},
		{"generation invalid", decGeneration, mutateJSON(t, validGeneration(), func(m map[string]any) { m["parallelism"] = 0 }), "parallelism", ">= 1"},
		{"generation int32 range", decGeneration, bytes.Replace(gb, []byte(`"parallelism": 2,`), []byte(`"parallelism": 99999999999999999999,`), 1), "parallelism", "not an integer in the range of int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantFieldErr(t, tt.decode(tt.data), tt.field, tt.frag)
		})
	}
}

func decLatest(b []byte) error     { _, err := DecodeLatest(LatestPath, b); return err }
func decGeneration(b []byte) error { _, err := DecodeGeneration(GenerationPath(3), b); return err }

func TestDecodeAcceptsNullLists(t *testing.T) {
	m := validManifest()
	m.Operators, m.Outputs, m.SideOutputs, m.Parent = nil, nil, nil, nil
	data, err := EncodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"outputs": null`)) || !bytes.Contains(data, []byte(`"parent": null`)) {
		t.Fatalf("expected nulls in\n%s", data)
	}
	got, err := DecodeManifest("x", data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("got %+v, want %+v", got, m)
	}
	// omitempty fields may be absent: subtask 0 and kg_lo 0 are not written.
	if strings.Contains(string(data), `"kg_lo": 0`) {
		t.Error("kg_lo 0 was written although omitempty")
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Doc: "manifest", Name: "k", Field: "f", Msg: "m"}, "manifest k: field f: m"},
		{&Error{Doc: "manifest", Field: "f", Msg: "m"}, "manifest: field f: m"},
		{&Error{Doc: "manifest", Name: "k", Msg: "m"}, "manifest k: m"},
		{&Error{Field: "f", Msg: "m"}, "field f: m"},
		{&Error{Msg: "m"}, "m"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
		if !errors.Is(tt.err, ErrCorrupt) {
			t.Errorf("%q does not wrap ErrCorrupt", tt.err)
		}
	}
}
