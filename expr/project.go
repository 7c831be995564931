package expr

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ProjectItem is one output column of a projection. Expr "*" keeps every input
// column (Name must be empty). A bare column reference keeps that column
// unchanged, named Name or, when Name is empty, as the input column. Any other
// expression needs a Name.
type ProjectItem struct {
	Name string
	Expr string
}

// Projection computes an ordered list of output columns from an input schema.
// It is immutable and safe for concurrent use.
type Projection struct {
	exprs  []*Expr
	schema *arrow.Schema
	input  *arrow.Schema
}

// CompileProjection compiles items against schema. Output names must be unique.
// Options add user-defined functions ([WithFunctions]).
func CompileProjection(items []ProjectItem, schema *arrow.Schema, opts ...Option) (*Projection, error) {
	o := makeOptions(opts)
	if schema == nil {
		return nil, fmt.Errorf("projection: nil schema")
	}
	p := &Projection{input: schema}
	var fields []arrow.Field
	seen := map[string]int{}
	add := func(f arrow.Field, e *Expr, item int) error {
		if prev, ok := seen[f.Name]; ok {
			return fmt.Errorf("projection item %d: output column %q is already produced by item %d", item, f.Name, prev)
		}
		seen[f.Name] = item
		fields = append(fields, f)
		p.exprs = append(p.exprs, e)
		return nil
	}
	for i, it := range items {
		if it.Expr == "*" {
			if it.Name != "" {
				return nil, fmt.Errorf("projection item %d: \"*\" cannot be named (got %q)", i, it.Name)
			}
			for c, f := range schema.Fields() {
				e := &Expr{src: f.Name, schema: schema, col: c, dt: f.Type, used: []int{c}}
				if err := add(f, e, i); err != nil {
					return nil, err
				}
			}
			continue
		}
		ctx := fmt.Sprintf("projection item %d", i)
		if it.Name != "" {
			ctx = fmt.Sprintf("projection %q", it.Name)
		}
		e, err := compile(ctx, it.Expr, schema, o)
		if err != nil {
			return nil, err
		}
		var f arrow.Field
		switch {
		case e.root == nil: // bare column: keep type, nullability and metadata
			f = schema.Field(e.col)
			if it.Name != "" {
				f.Name = it.Name
			}
		case it.Name == "":
			return nil, fmt.Errorf("projection item %d: expression %q needs a name", i, it.Expr)
		default:
			f = arrow.Field{Name: it.Name, Type: e.dt, Nullable: true}
		}
		if err := add(f, e, i); err != nil {
			return nil, err
		}
	}
	md := schema.Metadata()
	p.schema = arrow.NewSchema(fields, &md)
	return p, nil
}

// Schema is the output schema.
func (p *Projection) Schema() *arrow.Schema { return p.schema }

// Apply computes the output batch. Bare column references share rec's buffers;
// computed columns are allocated from mem. The caller releases the result.
func (p *Projection) Apply(rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, 0, len(p.exprs))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, e := range p.exprs {
		arr, err := e.Eval(rec, mem)
		if err != nil {
			return nil, fmt.Errorf("projection %q: %w", p.schema.Field(len(cols)).Name, err)
		}
		cols = append(cols, arr)
	}
	return array.NewRecordBatch(p.schema, cols, rec.NumRows()), nil
}

// Columns returns the input columns the projection reads, in input schema
// order ("*" reads them all).
func (p *Projection) Columns() []string {
	seen := map[string]bool{}
	for _, e := range p.exprs {
		for _, c := range e.Columns() {
			seen[c] = true
		}
	}
	var out []string
	for _, f := range p.input.Fields() {
		if seen[f.Name] {
			out = append(out, f.Name)
		}
	}
	return out
}
