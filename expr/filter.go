package expr

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Filter keeps the rows of rec where e is true; rows where it is false or null
// are dropped, and their count is returned. When every row passes, the result
// is rec itself, retained; when none does, an empty zero-copy slice of rec.
// New buffers come from mem. The caller releases the result.
func Filter(e *Expr, rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, int64, error) {
	if e == nil {
		return nil, 0, fmt.Errorf("filter: nil expression")
	}
	if id := e.dt.ID(); id != arrow.BOOL && id != arrow.NULL {
		return nil, 0, fmt.Errorf("filter %q: must be a boolean expression, got %s", e.src, e.dt)
	}
	if err := e.check(rec); err != nil {
		return nil, 0, err
	}
	n := int(rec.NumRows())
	keep, kept, err := e.selection(rec)
	if err != nil {
		return nil, 0, err
	}
	switch kept {
	case n:
		rec.Retain()
		return rec, 0, nil
	case 0:
		return rec.NewSlice(0, 0), int64(n), nil
	}
	idx := make([]int32, 0, kept)
	for i, k := range keep {
		if k {
			idx = append(idx, int32(i))
		}
	}
	out, err := takeRecord(rec, idx, mem)
	if err != nil {
		return nil, 0, fmt.Errorf("filter %q: %w", e.src, err)
	}
	return out, int64(n - kept), nil
}

// selection evaluates a boolean expression to one bool per row (null is false)
// and counts the true rows.
func (e *Expr) selection(rec arrow.RecordBatch) ([]bool, int, error) {
	n := int(rec.NumRows())
	var v *vec
	if e.root == nil { // a bare boolean (or null) column
		var err error
		t, _ := columnTyp(e.dt)
		if v, err = loadColumn(rec.Column(e.col), t); err != nil {
			return nil, 0, fmt.Errorf("filter %q: %w", e.src, err)
		}
	} else {
		var err error
		if v, err = e.evalVec(rec); err != nil {
			return nil, 0, err
		}
	}
	if v.t.k == kNull || (v.isConst && (!v.validAt(0) || !v.b[0])) {
		return nil, 0, nil
	}
	if v.isConst {
		return nil, n, nil
	}
	keep := v.b[:n]
	if v.valid != nil {
		keep = make([]bool, n)
		for i, ok := range v.valid[:n] {
			keep[i] = ok && v.b[i]
		}
	}
	kept := 0
	for _, k := range keep {
		if k {
			kept++
		}
	}
	return keep, kept, nil
}
