package operators

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// The state plan: a stable description of a window's state layout, recorded
// by the engine (in the generation record, beside the state fingerprint) so
// that a later run, whose spec may have changed, can rebuild the window that
// wrote the state and call PlanStateEvolution.
//
// Format (JSON, one object; version 1):
//
//	{"format":"floe-window-state-plan","version":1,
//	 "id":"window-1","kind":"tumbling|sliding|session",
//	 "size":"1m0s","slide":"…","gap":"…","allowed_lateness":"30s",  (Go durations; omitted when 0)
//	 "event_time":"event_time","keys":["user_id"],
//	 "aggregates":[{"name":"clicks","expr":"count()"},{"name":"total","expr":"sum(bytes)"}],
//	 "input":[{"name":"event_time","type":"timestamp[us, tz=UTC]"},…],
//	 "state_fingerprint":"v1-…"}
//
// input lists only the columns the window reads (event time, keys, aggregate
// inputs), in input-schema order, with their Arrow type names (int32, int64,
// float64, utf8, bool, timestamp[us, tz=UTC], …): the state layout depends
// on nothing else. RenamedFrom is not recorded: it is a hint for one
// transition, not part of a state's description.
//
// Compatibility rule: a reader ignores fields it does not know, so a field
// that a reader may safely ignore is added without a new version. A change
// that would make an older reader misread a plan (a field that changes what
// the state means) takes version 2; a reader refuses a version it does not
// know, naming it. state_fingerprint is checked on read: a plan that this
// floe would turn into another layout than the one recorded is refused
// instead of misread. testdata/stateplan/*.json are golden plans of version 1
// that every later floe must keep reading.

// StatePlanFormat and StatePlanVersion identify the state plan encoding.
const (
	StatePlanFormat  = "floe-window-state-plan"
	StatePlanVersion = 1
)

type statePlanJSON struct {
	Format      string         `json:"format"`
	Version     int            `json:"version"`
	ID          string         `json:"id,omitempty"`
	Kind        string         `json:"kind"`
	Size        string         `json:"size,omitempty"`
	Slide       string         `json:"slide,omitempty"`
	Gap         string         `json:"gap,omitempty"`
	Lateness    string         `json:"allowed_lateness,omitempty"`
	EventTime   string         `json:"event_time"`
	Keys        []string       `json:"keys"`
	Aggregates  []statePlanAgg `json:"aggregates"`
	Input       []statePlanCol `json:"input"`
	Fingerprint string         `json:"state_fingerprint"`
}

type statePlanAgg struct {
	Name string `json:"name"`
	Expr string `json:"expr"`
}

type statePlanCol struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// MarshalStatePlan encodes the state plan of a window of spec over input
// schema in (see the format above). It fails when the spec does not compile
// against in (NewWindow) or reads a column of a type without a stable name.
func MarshalStatePlan(spec WindowSpec, in *arrow.Schema) ([]byte, error) {
	w, err := NewWindow(spec, in, 1)
	if err != nil {
		return nil, fmt.Errorf("state plan: %w", err)
	}
	p := statePlanJSON{Format: StatePlanFormat, Version: StatePlanVersion, ID: spec.ID, Kind: spec.Kind.String(),
		EventTime: spec.EventTime, Keys: append([]string{}, spec.Keys...), Fingerprint: w.StateFingerprint()}
	dur := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	p.Size, p.Slide, p.Gap, p.Lateness = dur(spec.Size), dur(spec.Slide), dur(spec.Gap), dur(spec.AllowedLateness)
	if spec.Kind != Sliding {
		p.Slide = ""
	}
	if spec.Kind == Session {
		p.Size = ""
	} else {
		p.Gap = ""
	}
	used := make([]bool, in.NumFields())
	used[w.tsCol] = true
	for _, c := range w.keyCols {
		used[c] = true
	}
	p.Aggregates = make([]statePlanAgg, len(spec.Aggregates))
	for i, a := range spec.Aggregates {
		p.Aggregates[i] = statePlanAgg{Name: a.Name, Expr: a.String()}
		if c := w.aggCols[i]; c >= 0 {
			used[c] = true
		}
	}
	for i, f := range in.Fields() {
		if !used[i] {
			continue
		}
		name, ok := stableTypeName(f.Type)
		if !ok {
			return nil, fmt.Errorf("state plan: column %s has type %s, which has no stable name in the state plan", f.Name, f.Type)
		}
		p.Input = append(p.Input, statePlanCol{Name: f.Name, Type: name})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("state plan: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// UnmarshalStatePlan decodes a state plan written by MarshalStatePlan: the
// window spec (without RenamedFrom) and an input schema holding the columns
// the window reads. It refuses another format, an unknown version, and a
// plan whose recorded state fingerprint is not the one the decoded spec gives
// (a plan this floe would misread). Unknown fields are ignored.
func UnmarshalStatePlan(data []byte) (WindowSpec, *arrow.Schema, error) {
	fail := func(format string, args ...any) (WindowSpec, *arrow.Schema, error) {
		return WindowSpec{}, nil, fmt.Errorf("state plan: "+format, args...)
	}
	var p statePlanJSON
	if err := json.Unmarshal(data, &p); err != nil {
		return fail("%v", err)
	}
	if p.Format != StatePlanFormat {
		return fail("format %q, want %q", p.Format, StatePlanFormat)
	}
	if p.Version != StatePlanVersion {
		return fail("version %d is not readable by this floe (it reads version %d); use the floe release that wrote it, or a newer one", p.Version, StatePlanVersion)
	}
	spec := WindowSpec{ID: p.ID, EventTime: p.EventTime}
	if len(p.Keys) > 0 {
		spec.Keys = p.Keys
	}
	switch p.Kind {
	case "tumbling":
		spec.Kind = Tumbling
	case "sliding":
		spec.Kind = Sliding
	case "session":
		spec.Kind = Session
	default:
		return fail("unknown window kind %q", p.Kind)
	}
	for _, d := range []struct {
		name string
		text string
		dst  *time.Duration
	}{{"size", p.Size, &spec.Size}, {"slide", p.Slide, &spec.Slide}, {"gap", p.Gap, &spec.Gap}, {"allowed_lateness", p.Lateness, &spec.AllowedLateness}} {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil {
			return fail("%s: %v", d.name, err)
		}
		*d.dst = v
	}
	for _, a := range p.Aggregates {
		as, err := ParseAggregate(a.Name, a.Expr)
		if err != nil {
			return fail("%v", err)
		}
		spec.Aggregates = append(spec.Aggregates, as)
	}
	fields := make([]arrow.Field, len(p.Input))
	for i, c := range p.Input {
		dt, ok := parseStableTypeName(c.Type)
		if !ok {
			return fail("input column %s: unknown type %q", c.Name, c.Type)
		}
		fields[i] = arrow.Field{Name: c.Name, Type: dt, Nullable: true}
	}
	in := arrow.NewSchema(fields, nil)
	w, err := NewWindow(spec, in, 1)
	if err != nil {
		return fail("%v", err)
	}
	if got := w.StateFingerprint(); p.Fingerprint != "" && got != p.Fingerprint {
		return fail("recorded state fingerprint %s, but this floe builds %s from the plan: the state format changed; refusing to misread it", p.Fingerprint, got)
	}
	return spec, in, nil
}

// stableTypes are the column types a state plan can name, by Arrow's name.
var stableTypes = func() map[string]arrow.DataType {
	m := map[string]arrow.DataType{}
	for _, dt := range []arrow.DataType{
		arrow.FixedWidthTypes.Boolean,
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
		arrow.FixedWidthTypes.Float16, arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64,
		arrow.PrimitiveTypes.Date32, arrow.PrimitiveTypes.Date64,
		arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeBinary,
	} {
		m[dt.String()] = dt
	}
	return m
}()

func stableTypeName(dt arrow.DataType) (string, bool) {
	if ts, ok := dt.(*arrow.TimestampType); ok {
		if strings.ContainsAny(ts.TimeZone, ",]") {
			return "", false
		}
		return ts.String(), true
	}
	if t, ok := stableTypes[dt.String()]; ok && arrow.TypeEqual(t, dt) {
		return dt.String(), true
	}
	return "", false
}

// parseStableTypeName is the inverse of stableTypeName:
// "timestamp[us]", "timestamp[us, tz=UTC]", or a name of stableTypes.
func parseStableTypeName(s string) (arrow.DataType, bool) {
	if dt, ok := stableTypes[s]; ok {
		return dt, true
	}
	rest, ok := strings.CutPrefix(s, "timestamp[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return nil, false
	}
	rest = strings.TrimSuffix(rest, "]")
	unit, tz, hasTZ := strings.Cut(rest, ", tz=")
	ts := &arrow.TimestampType{TimeZone: tz}
	switch unit {
	case "s":
		ts.Unit = arrow.Second
	case "ms":
		ts.Unit = arrow.Millisecond
	case "us":
		ts.Unit = arrow.Microsecond
	case "ns":
		ts.Unit = arrow.Nanosecond
	default:
		return nil, false
	}
	if hasTZ && tz == "" {
		return nil, false
	}
	if ts.String() != s {
		return nil, false
	}
	return ts, true
}

// StateFormats lists the state format versions this release writes and
// reads, one per stateful operator kind (`floe version` prints them).
func StateFormats() []string {
	return []string{stateFormatVersion, slicedStateFormatVersion, joinStateFormatVersion, topNStateVersion, dedupStateVersion,
		fmt.Sprintf("%s/v%d", StatePlanFormat, StatePlanVersion)}
}
