package operators

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

var updateStatePlans = flag.Bool("update-stateplan", false, "rewrite testdata/stateplan/*.json (only with a new state plan version: old files must keep decoding)")

// statePlanInput is a window input with a column of every key type and some
// columns the windows do not read.
var statePlanInput = arrow.NewSchema([]arrow.Field{
	{Name: "unused_first", Type: arrow.PrimitiveTypes.Float32},
	{Name: "event_time", Type: eventTimeType},
	{Name: "user_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "shard", Type: arrow.PrimitiveTypes.Int32},
	{Name: "bytes", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ratio", Type: arrow.PrimitiveTypes.Float64},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "seen", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
	{Name: "blob", Type: arrow.BinaryTypes.Binary},
	{Name: "unused_last", Type: arrow.BinaryTypes.String},
}, nil)

type statePlanCase struct {
	file        string
	spec        WindowSpec
	fingerprint string // pinned: the layout the golden plan stands for
	columns     []string
}

func statePlanCases(t *testing.T) []statePlanCase {
	return []statePlanCase{
		{"tumbling_v1.json", WindowSpec{ID: "window-1", Keys: []string{"user_id"}, EventTime: "event_time", Kind: Tumbling, Size: time.Minute,
			AllowedLateness: 30 * time.Second, Aggregates: mustAggs(t, "clicks", "count()", "total_bytes", "sum(bytes)")},
			"v1-a4d0985696c0c453927ae2567d04343d", []string{"event_time", "user_id", "bytes"}},
		{"sliding_v1.json", WindowSpec{ID: "per-shard", Keys: []string{"shard", "ok"}, EventTime: "event_time", Kind: Sliding, Size: 5 * time.Minute,
			Slide: time.Minute, Aggregates: mustAggs(t, "n", "count(*)", "nb", "count(blob)", "s", "sum(bytes)", "a", "avg(ratio)", "lo", "min(user_id)",
				"hi", "max(seen)", "f", "first(shard)", "l", "last(ratio)", "d", "count_distinct(user_id)")},
			"", []string{"event_time", "user_id", "shard", "bytes", "ratio", "ok", "seen", "blob"}},
		{"session_v1.json", WindowSpec{Keys: []string{"seen", "ratio", "user_id"}, EventTime: "event_time", Kind: Session, Gap: 90*time.Second + time.Microsecond,
			AllowedLateness: time.Hour, Aggregates: mustAggs(t, "d", "count_distinct(shard)")},
			"", []string{"event_time", "user_id", "shard", "ratio", "seen"}},
		{"global_v1.json", WindowSpec{ID: "all", EventTime: "event_time", Kind: Tumbling, Size: 24 * time.Hour, Aggregates: mustAggs(t, "n", "count()")},
			"", []string{"event_time"}},
	}
}

// TestStatePlanGolden: the state plans of testdata/stateplan are exactly
// what MarshalStatePlan writes today, and they decode into the spec and the
// state layout they were written for: a later floe must keep reading them.
func TestStatePlanGolden(t *testing.T) {
	for _, c := range statePlanCases(t) {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", "stateplan", c.file)
			got, err := MarshalStatePlan(c.spec, statePlanInput)
			if err != nil {
				t.Fatal(err)
			}
			if *updateStatePlans {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got)+"\n" != string(golden) {
				t.Fatalf("MarshalStatePlan changed:\ngot  %s\nwant %s", got, golden)
			}
			spec, in, err := UnmarshalStatePlan(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(spec, c.spec) {
				t.Fatalf("decoded spec %+v, want %+v", spec, c.spec)
			}
			var cols []string
			for _, f := range in.Fields() {
				cols = append(cols, f.Name)
				want := statePlanInput.Field(statePlanInput.FieldIndices(f.Name)[0]).Type
				if !arrow.TypeEqual(f.Type, want) {
					t.Errorf("column %s: type %s, want %s", f.Name, f.Type, want)
				}
			}
			if strings.Join(cols, ",") != strings.Join(c.columns, ",") {
				t.Errorf("input columns %v, want %v", cols, c.columns)
			}
			w1, err := NewWindow(c.spec, statePlanInput, 128)
			if err != nil {
				t.Fatal(err)
			}
			w2, err := NewWindow(spec, in, 128)
			if err != nil {
				t.Fatal(err)
			}
			if w1.StateFingerprint() != w2.StateFingerprint() || !sameFields(w1.StateSchema(), w2.StateSchema()) {
				t.Fatalf("decoded plan gives another state layout: %s vs %s", w2.StateFingerprint(), w1.StateFingerprint())
			}
			if c.fingerprint != "" && w2.StateFingerprint() != c.fingerprint {
				t.Fatalf("fingerprint %s, pinned %s", w2.StateFingerprint(), c.fingerprint)
			}
			// The engine's path: the old spec rebuilt from the record
			// plans against the spec it was written for as "no change".
			ev, err := PlanStateEvolution(spec, w1.StateSpec(), in, statePlanInput)
			if err != nil || !ev.SameLayout() || len(ev.Changes()) != 0 {
				t.Fatalf("recorded plan vs its own spec: %v same=%v changes=%q", err, ev != nil && ev.SameLayout(), ev.Changes())
			}
		})
	}
}

// TestStatePlanRoundTrip: durations that are not whole seconds and a
// renamed_from (not recorded) survive a round trip.
func TestStatePlanRoundTrip(t *testing.T) {
	spec := WindowSpec{ID: "x", Keys: []string{"user_id"}, EventTime: "event_time", Kind: Sliding, Size: 3*time.Hour + 6*time.Microsecond,
		Slide: time.Hour + 2*time.Microsecond, AllowedLateness: 1500 * time.Millisecond, Aggregates: mustAggs(t, "m", "max(bytes)")}
	spec.Aggregates[0].RenamedFrom = "old_m"
	data, err := MarshalStatePlan(spec, statePlanInput)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "old_m") {
		t.Fatalf("renamed_from recorded: %s", data)
	}
	got, _, err := UnmarshalStatePlan(data)
	if err != nil {
		t.Fatal(err)
	}
	spec.Aggregates[0].RenamedFrom = ""
	if !reflect.DeepEqual(got, spec) {
		t.Fatalf("round trip: %+v, want %+v", got, spec)
	}
}

// TestStatePlanRefused: what a reader must refuse, each with a reason, and
// what it must accept (unknown fields).
func TestStatePlanRefused(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "stateplan", "tumbling_v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	g := string(golden)
	for _, c := range []struct {
		name, data, want string
	}{
		{"not json", "{", "state plan: unexpected end of JSON input"},
		{"other format", strings.Replace(g, StatePlanFormat, "floe-window-state", 1), `format "floe-window-state", want "floe-window-state-plan"`},
		{"newer version", strings.Replace(g, `"version":1`, `"version":2`, 1), "version 2 is not readable by this floe (it reads version 1)"},
		{"kind", strings.Replace(g, `"tumbling"`, `"hopping"`, 1), `unknown window kind "hopping"`},
		{"type", strings.Replace(g, `"int64"`, `"decimal128(38, 2)"`, 1), `input column bytes: unknown type "decimal128(38, 2)"`},
		{"size", strings.Replace(g, `"1m0s"`, `"a minute"`, 1), "size: time: invalid duration"},
		{"aggregate", strings.Replace(g, `sum(bytes)`, `summ(bytes)`, 1), `unknown function "summ"`},
		{"fingerprint", strings.Replace(g, `"1m0s"`, `"2m0s"`, 1), "recorded state fingerprint v1-a4d0985696c0c453927ae2567d04343d, but this floe builds"},
		{"missing column", strings.Replace(g, `{"name":"bytes","type":"int64"}`, `{"name":"bites","type":"int64"}`, 1), `column "bytes" not found`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.data == g {
				t.Fatal("the edit did not apply")
			}
			_, _, err := UnmarshalStatePlan([]byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	extra := strings.Replace(g, `"version":1,`, `"version":1,"written_by":"floe 9.9","future":{"x":[1]},`, 1)
	if _, _, err := UnmarshalStatePlan([]byte(extra)); err != nil {
		t.Fatalf("unknown fields must be ignored: %v", err)
	}
	if _, err := MarshalStatePlan(WindowSpec{Keys: []string{"k"}, EventTime: "event_time", Kind: Tumbling, Size: time.Minute,
		Aggregates: mustAggs(t, "n", "count(d)")}, arrow.NewSchema([]arrow.Field{
		{Name: "event_time", Type: eventTimeType}, {Name: "k", Type: arrow.BinaryTypes.String},
		{Name: "d", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}}}, nil)); err == nil || !strings.Contains(err.Error(), "column d has type decimal(10, 2), which has no stable name") {
		t.Fatalf("marshal of an unnamed type: %v", err)
	}
}

// FuzzUnmarshalStatePlan: the decoder never panics, whatever the bytes.
func FuzzUnmarshalStatePlan(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "stateplan", "*.json"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"format":"floe-window-state-plan","version":1,"kind":"session","gap":"-1s","input":[{"name":"t","type":"timestamp[us, tz="}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, in, err := UnmarshalStatePlan(data)
		if err != nil {
			return
		}
		if _, err := NewWindow(spec, in, 1); err != nil {
			t.Fatalf("decoded plan does not compile: %v", err)
		}
	})
}
