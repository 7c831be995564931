package iceberg

import (
	"context"
	"fmt"
	"path"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Current returns the current version of the table as an iceberg-go table
// for reading, or nil when there is no table yet. Do not commit through it.
//
// Deprecated: use Head (snapshot id and count, metadata location). Current
// is the only reason this package still links iceberg-go's table package,
// whose init costs every floe process ~90 ms and ~32 MB; it goes once
// engine/report.go and cmd/floe's tests stop calling it.
func (t *Table) Current(ctx context.Context) (*table.Table, error) {
	s, err := t.load(ctx)
	if err != nil || s == nil {
		return nil, err
	}
	data, err := s.meta.encode()
	if err != nil {
		return nil, err
	}
	md, err := table.ParseMetadataBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, s.key, err)
	}
	fsF := func(ctx context.Context) (icebergio.IO, error) { return newStoreIO(ctx, t.st, t.loc), nil }
	return table.New(table.Identifier{"floe", path.Base(t.loc)}, md, s.loc, fsF, nil), nil
}
