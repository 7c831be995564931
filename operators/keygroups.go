package operators

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/keygroup"
)

// MarkKeyGroups sets mark[g-lo] for the key group g of every row sel of rec
// (nil: every row) whose group lies in [lo, lo+len(mark)), with k key
// groups, and returns how many marks it newly set. It is how a reader tells
// which key groups a batch touches before it decides what state to decode.
func MarkKeyGroups(rec arrow.RecordBatch, keyCols []int, k int, sel []int32, lo int, mark []bool) (int, error) {
	if rec == nil || rec.NumRows() == 0 {
		return 0, nil
	}
	kinds, err := keyKinds(rec.Schema(), keyCols)
	if err != nil {
		return 0, fmt.Errorf("mark key groups: %w", err)
	}
	cols := make([]arrow.Array, len(keyCols))
	for i, c := range keyCols {
		cols[i] = rec.Column(c)
	}
	var enc keyEncoder
	enc.bind(kinds, cols)
	var buf []byte
	n := 0
	visit := func(i int) {
		buf = enc.encode(buf[:0], i)
		if g := keygroup.Of(buf, k) - lo; g >= 0 && g < len(mark) && !mark[g] {
			mark[g] = true
			n++
		}
	}
	if sel == nil {
		for i := range int(rec.NumRows()) {
			visit(i)
		}
		return n, nil
	}
	for _, i := range sel {
		visit(int(i))
	}
	return n, nil
}
