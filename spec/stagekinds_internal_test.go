package spec

import (
	"reflect"
	"strings"
	"testing"
)

// TestStageKindsCoverStageFields: every configuration field of Stage (a
// pointer) belongs to exactly one entry of stageKinds, and each entry's
// hooks are complete, so that a kind added to Stage but not to the table
// (or the other way round) fails here rather than decoding as nothing.
func TestStageKindsCoverStageFields(t *testing.T) {
	st := reflect.TypeOf(Stage{})
	fields := 0
	for i := range st.NumField() {
		f := st.Field(i)
		if f.Type.Kind() != reflect.Pointer {
			continue
		}
		fields++
		var s Stage
		reflect.ValueOf(&s).Elem().Field(i).Set(reflect.New(f.Type.Elem()))
		ks := s.setKinds()
		if len(ks) != 1 {
			t.Errorf("Stage.%s set: %d kinds see it, want 1 (add its entry to stagekinds.go)", f.Name, len(ks))
			continue
		}
		if s.Kind() != ks[0].name {
			t.Errorf("Stage.%s: Kind() = %q, want %q", f.Name, s.Kind(), ks[0].name)
		}
	}
	if fields != len(stageKinds) {
		t.Errorf("Stage has %d kind fields, stageKinds %d entries", fields, len(stageKinds))
	}
	for _, k := range stageKinds {
		if k.set == nil || k.decode == nil || k.validate == nil || k.describe == nil || k.inputs < 1 || k.inputs > 2 {
			t.Errorf("kind %s: incomplete entry (set, decode, validate, describe and inputs 1 or 2 are required)", k.name)
		}
	}
	if got := strings.Join(stageFields[4:], ","); got != strings.Join(StageKinds, ",") {
		t.Errorf("stage fields %s, want the kinds %s", got, strings.Join(StageKinds, ","))
	}
	if got := lateKinds(); got != "window, join, top_n, dedup and over" {
		t.Errorf("lateKinds() = %q", got)
	}
}

// TestUnknownStageKind: a stage whose kind is misspelled, or that has no
// kind, is refused at its place in the spec, naming the kinds there are.
func TestUnknownStageKind(t *testing.T) {
	const doc = `name: p
sources:
  a: {type: files, url: in/a, format: jsonl, event_time: ts, schema: {id: int64, ts: timestamp}}
stages:
  - name: valid
    input: a
    filter: "id > 0"
  - name: counts
    input: valid
    windw: {key: [id], tumbling: 1m, aggregates: {n: "count()"}}
sinks:
  out: {input: counts, type: files, url: out, format: jsonl}
state: {url: st}
`
	_, err := Parse("p.yaml", []byte(doc), t.TempDir())
	if err == nil {
		t.Fatal("parsed a stage of an unknown kind")
	}
	for _, want := range []string{
		"p.yaml:10:5: stages[1].windw: unknown field (did you mean window?)",
		"stages[1]: needs one of filter, project, window, join, lookup, top_n, dedup, over",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}
