package formats

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// toDictString returns a string column (plain, or a dictionary of strings
// with any index type) as a DictStringType array. A DictStringType array is
// returned as it is (a new reference); a dictionary with other indices
// keeps its dictionary; anything else is hashed into a new dictionary of
// the distinct values in first-seen order.
func toDictString(a arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	if isDictString(a.DataType()) {
		a.Retain()
		return a, nil
	}
	ctx := compute.WithAllocator(context.Background(), mem)
	if d, ok := a.(*array.Dictionary); ok {
		if d.Dictionary().DataType().ID() == arrow.STRING {
			idx, err := compute.CastArray(ctx, d.Indices(), compute.SafeCastOptions(arrow.PrimitiveTypes.Int32))
			if err != nil {
				return nil, fmt.Errorf("dictionary indices: %w", err)
			}
			defer idx.Release()
			return array.NewDictionaryArray(DictStringType, idx, d.Dictionary()), nil
		}
		plain, err := compute.CastArray(ctx, d, compute.SafeCastOptions(d.Dictionary().DataType()))
		if err != nil {
			return nil, fmt.Errorf("unpack dictionary: %w", err)
		}
		defer plain.Release()
		a = plain
	}
	if a.DataType().ID() != arrow.STRING {
		s, err := compute.CastArray(ctx, a, compute.SafeCastOptions(arrow.BinaryTypes.String))
		if err != nil {
			return nil, err
		}
		defer s.Release()
		a = s
	}
	b := array.NewDictionaryBuilder(mem, DictStringType).(*array.BinaryDictionaryBuilder)
	defer b.Release()
	if err := b.AppendArray(a); err != nil {
		return nil, fmt.Errorf("build dictionary: %w", err)
	}
	return b.NewArray(), nil
}
