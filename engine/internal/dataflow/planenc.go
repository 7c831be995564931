package dataflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/spec"
)

// The plan's identity decides whether a run continues the head's generation
// or starts a new one. It is an explicit, versioned, canonical text owned by
// floe (encodePlan), hashed as "v2-<hex>": adding a field to a Go struct of
// the spec package cannot change it, only a deliberate new version can.
//
// Generations written before v2 carry planHashV1, the JSON of the spec's Go
// structs as they were then. It is kept, frozen (the v1 types below), only
// to recognise those generations: a run whose plan hashes to a head's v1
// hash continues that generation.

// planEncodingVersion is the version of encodePlan's text.
const PlanEncodingVersion = 2

// EncodePlan returns the canonical text of the parts of p that define a
// generation: the source columns (declared or inferred) and event time,
// then every operator with its resolved id. Strings are Go-quoted, durations
// are integer microseconds, lines end with '\n'.
func EncodePlan(p *spec.Pipeline, src *arrow.Schema) string {
	var b strings.Builder
	fmt.Fprintf(&b, "floe-plan v%d\n", PlanEncodingVersion)
	fmt.Fprintf(&b, "event_time %s\n", strconv.Quote(p.Source.EventTime))
	for _, f := range src.Fields() {
		fmt.Fprintf(&b, "column %s %s\n", strconv.Quote(f.Name), typeName(f.Type))
	}
	us := func(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }
	for i, op := range p.Operators {
		id := opID(op, i)
		switch {
		case op.Filter != nil:
			fmt.Fprintf(&b, "filter %s %s\n", strconv.Quote(id), strconv.Quote(op.Filter.Expr))
		case op.Project != nil:
			fmt.Fprintf(&b, "project %s %d\n", strconv.Quote(id), len(op.Project.Columns))
			for _, c := range op.Project.Columns {
				fmt.Fprintf(&b, "  column %s %s\n", strconv.Quote(c.Name), strconv.Quote(c.Expr))
			}
		case op.Window != nil:
			w := op.Window
			keys := make([]string, len(w.Key))
			for j, k := range w.Key {
				keys[j] = strconv.Quote(k)
			}
			fmt.Fprintf(&b, "window %s key=[%s]", strconv.Quote(id), strings.Join(keys, ","))
			switch {
			case w.Tumbling > 0:
				fmt.Fprintf(&b, " tumbling=%s", us(w.Tumbling))
			case w.Sliding != nil:
				fmt.Fprintf(&b, " sliding=%s/%s", us(w.Sliding.Size), us(w.Sliding.Slide))
			case w.Session != nil:
				fmt.Fprintf(&b, " session=%s", us(w.Session.Gap))
			}
			fmt.Fprintf(&b, " lateness=%s %d\n", us(w.AllowedLateness), len(w.Aggregates))
			for _, a := range w.Aggregates {
				fmt.Fprintf(&b, "  aggregate %s %s %s\n", strconv.Quote(a.Name), a.Func, strconv.Quote(a.Column))
			}
		}
	}
	return b.String()
}

// HashPlan hashes an encodePlan text.
func HashPlan(text string) string {
	sum := sha256.Sum256([]byte(text))
	return fmt.Sprintf("v%d-%s", PlanEncodingVersion, hex.EncodeToString(sum[:16]))
}

// opID is an operator's id: the spec's id:, else kind-position.
func opID(op spec.Operator, i int) string {
	if op.ID != "" {
		return op.ID
	}
	return fmt.Sprintf("%s-%d", op.Kind(), i)
}

// typeName names an Arrow type in floe's words where floe has one, else in
// Arrow's (an inferred Parquet column of a type floe does not declare).
func typeName(t arrow.DataType) string {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return "string"
	case arrow.INT64:
		return "int64"
	case arrow.INT32:
		return "int32"
	case arrow.FLOAT64:
		return "float64"
	case arrow.BOOL:
		return "bool"
	case arrow.TIMESTAMP:
		ts := t.(*arrow.TimestampType)
		return "timestamp[" + ts.Unit.String() + "," + ts.TimeZone + "]"
	}
	return "arrow:" + t.String()
}

// PlanHashV1 is the plan hash of generations written before v2: the JSON of
// the operators (in the frozen v1 shape) and Arrow's rendering of the
// source schema. Do not change it: it only has to reproduce old hashes.
func PlanHashV1(p *spec.Pipeline, src *arrow.Schema) string {
	ops := make([]v1Operator, len(p.Operators))
	for i, op := range p.Operators {
		o := v1Operator{ID: op.ID}
		if op.Filter != nil {
			o.Filter = &v1Filter{Expr: op.Filter.Expr}
		}
		if op.Project != nil {
			o.Project = &v1Project{Columns: []v1Projection{}}
			for _, c := range op.Project.Columns {
				o.Project.Columns = append(o.Project.Columns, v1Projection{Name: c.Name, Expr: c.Expr})
			}
			if op.Project.Columns == nil {
				o.Project.Columns = nil
			}
		}
		if w := op.Window; w != nil {
			ow := &v1Window{Key: w.Key, Tumbling: w.Tumbling, AllowedLateness: w.AllowedLateness}
			if w.Sliding != nil {
				ow.Sliding = &v1Sliding{Size: w.Sliding.Size, Slide: w.Sliding.Slide}
			}
			if w.Session != nil {
				ow.Session = &v1Session{Gap: w.Session.Gap}
			}
			if w.Aggregates != nil {
				ow.Aggregates = []v1Aggregate{}
			}
			for _, a := range w.Aggregates {
				ow.Aggregates = append(ow.Aggregates, v1Aggregate{Name: a.Name, Func: string(a.Func), Column: a.Column})
			}
			o.Window = ow
		}
		ops[i] = o
	}
	if p.Operators == nil {
		ops = nil
	}
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(ops)
	_ = enc.Encode(src.String())
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// The v1 shape of spec.Operator (release of 2026-11), field for field.
type (
	v1Operator struct {
		ID      string
		Filter  *v1Filter
		Project *v1Project
		Window  *v1Window
	}
	v1Filter     struct{ Expr string }
	v1Project    struct{ Columns []v1Projection }
	v1Projection struct{ Name, Expr string }
	v1Window     struct {
		Key             []string
		Tumbling        time.Duration
		Sliding         *v1Sliding
		Session         *v1Session
		AllowedLateness time.Duration
		Aggregates      []v1Aggregate
	}
	v1Sliding   struct{ Size, Slide time.Duration }
	v1Session   struct{ Gap time.Duration }
	v1Aggregate struct{ Name, Func, Column string }
)

// SamePlan reports whether a generation's recorded plan hash is the hash of
// this plan, in whichever encoding version the generation was written.
func SamePlan(recorded string, p *spec.Pipeline, src *arrow.Schema, v2 string) bool {
	if strings.HasPrefix(recorded, "sha256:") {
		return recorded == PlanHashV1(p, src)
	}
	return recorded == v2
}
