package dataflow

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// TestDictKeysPlan: a window reading a Parquet source directly decodes its
// string key as dictionary<int32, utf8>, and the Parquet decoder returns it
// so; a window behind a filter, a JSON-lines source or an int key do not,
// and the plan's identity (hash, fingerprints) is that of plain keys.
func TestDictKeysPlan(t *testing.T) {
	var file []byte
	if err := datagen.Generate(datagen.Options{Rows: 2000, Files: 1, Users: 50, Span: time.Hour, Seed: 3, Format: "parquet"},
		func(_ string, data []byte) error { file = data; return nil }); err != nil {
		t.Fatal(err)
	}
	src, err := formats.ParquetSchema("f.parquet", file)
	if err != nil {
		t.Fatal(err)
	}
	build := func(format spec.Format, filter bool, key string) *spec.Pipeline {
		p := spec.New("t").FromFiles("file:///in", format).EventTime("event_time", time.Second)
		if filter {
			p.Filter("bytes > 0")
		}
		p.Window(spec.NewTumbling(time.Minute).By(key).Agg("clicks", spec.Count, ""))
		p.ToFiles("file:///out", spec.Parquet).StateAt("file:///state", 2)
		return p
	}
	decodeOf := func(pl *Plan) *arrow.Schema { return pl.Graph.Nodes[0].Out } // the source node's decode schema
	pl, err := CompileLinear(build(spec.Parquet, false, "user_id"), src)
	if err != nil {
		t.Fatal(err)
	}
	dec := decodeOf(pl)
	ui := dec.FieldIndices("user_id")[0]
	if !arrow.TypeEqual(dec.Field(ui).Type, DictKeyType) {
		t.Fatalf("a Parquet window on a string key decodes it as %v", dec.Field(ui).Type)
	}
	d, err := formats.Decode("parquet", "f.parquet", file, formats.DecodeOptions{Schema: dec, EventTime: "event_time", Mem: memory.DefaultAllocator})
	if err != nil {
		t.Fatalf("decode with dictionary keys: %v", err)
	}
	defer func() {
		for _, b := range d.Batches {
			b.Release()
		}
	}()
	if len(d.Batches) == 0 || !arrow.TypeEqual(d.Batches[0].Column(ui).DataType(), DictKeyType) {
		t.Fatalf("the Parquet decoder returned %v, want user_id as %v", d.Batches, DictKeyType)
	}
	lin, err := Compile(build(spec.Parquet, false, "user_id"), src)
	if err != nil {
		t.Fatal(err)
	}
	if lin.Hash != pl.Hash || lin.Ops[0].StateSchema != pl.Ops[0].StateSchema || lin.Ops[0].StatePlan != pl.Ops[0].StatePlan {
		t.Fatal("dictionary keys changed the plan's identity")
	}
	if sp := StatePlanOf(mustOp(t, pl.Graph.State[0])); sp != lin.Ops[0].StatePlan {
		t.Fatalf("the window's state plan with dictionary keys:\n%s\nwant the plain one:\n%s", sp, lin.Ops[0].StatePlan)
	}
	for what, p := range map[string]*spec.Pipeline{
		"a filter before the window": build(spec.Parquet, true, "user_id"),
		"JSON lines":                 build(spec.JSONL, false, "user_id"),
		"an int64 key":               build(spec.Parquet, false, "bytes"),
	} {
		pl, err := CompileLinear(p, src)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, f := range decodeOf(pl).Fields() {
			if f.Type.ID() == arrow.DICTIONARY {
				t.Fatalf("%s: dictionary keys planned (%s)", what, f.Name)
			}
		}
	}
}

func mustOp(t *testing.T, n *Node) operators.Stateful {
	t.Helper()
	op, err := n.NewOp()
	if err != nil {
		t.Fatal(err)
	}
	return op
}
