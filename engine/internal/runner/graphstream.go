package runner

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/floe-dev/floe/engine/internal/dataflow"
)

// Streaming a graph pipeline without a keyed stage (stream.go does the
// decoding, the parts and the restarts). Each decoded batch of a source
// goes through the stateless nodes downstream of that source, in node
// order, and every sink reading a node the batch reached gets that node's
// rows (routeGraph); the parts of each sink are numbered in the subtask
// slot, per sink directory, as the linear form's are. Every sink kind
// streams: files, Hive-partitioned files (one part series per partition
// directory) and the Iceberg table (one per data directory).
//
// The rows of a sink come in file order, and within a file in batch order:
// the order the unstreamed path (processGraph) writes them in, so a
// streamed epoch's parts, concatenated, hold the rows an unstreamed epoch
// writes as one file.

// streamSourceOf returns the source node a source file belongs to.
func (r *Runner) streamSourceOf(key string) (*dataflow.Node, error) {
	src, _ := r.Plan.Graph.SourceOf(key)
	if src == nil {
		return nil, fmt.Errorf("source file %s belongs to no source of the graph (internal error)", key)
	}
	return src, nil
}

// routeGraph runs batch b, the rows of node from (a source, or the end of
// its decode chain for a prefetched file), through the stateless nodes
// after it and sends each sink's rows (target 0: the first sink, then the
// further ones in spec order). It returns how many batches it sent and how
// many rows the filters of the source's decode chain dropped (the rows it
// counts as filtered, as decodeGraphFile does).
func (r *Runner) routeGraph(from *dataflow.Node, b arrow.RecordBatch, send func(streamBatch) error) (int, int64, error) {
	if from == nil || b.NumRows() == 0 {
		return 0, 0, nil
	}
	gp := r.Plan.Graph
	rows := map[*dataflow.Node]arrow.RecordBatch{from: b}
	var filtered int64
	for _, nd := range gp.Nodes {
		if nd.Kind == "source" {
			continue
		}
		in, ok := rows[nd.Ins[0]] // a stateless node has one input
		if !ok {
			continue
		}
		o, err := r.mapNode(nd, in)
		if err != nil {
			return 0, 0, err
		}
		if nd.AtDecode && nd.Stage.Filter != nil {
			filtered += in.NumRows() - o.NumRows()
		}
		if o.NumRows() > 0 {
			rows[nd] = o
		}
	}
	sent := 0
	for i, nd := range append([]*dataflow.Node{gp.Sink}, gp.Extra...) {
		o, ok := rows[nd]
		if !ok {
			continue
		}
		if err := send(streamBatch{to: i, b: o}); err != nil {
			return sent, filtered, err
		}
		sent++
	}
	return sent, filtered, nil
}

// mapNode runs a stateless node (filter, project, lookup) on one batch.
func (r *Runner) mapNode(nd *dataflow.Node, b arrow.RecordBatch) (arrow.RecordBatch, error) {
	if nd.Stage != nil {
		o, _, err := nd.Stage.Apply(b, r.Mem)
		return o, err
	}
	if nd.Lookup == nil {
		return nil, fmt.Errorf("stage %s: a %s stage is not stateless (internal error)", nd.Name, nd.Kind)
	}
	lk := nd.Lookup.Op
	if lk == nil {
		return nil, fmt.Errorf("stage %s: the lookup table is not loaded (internal error)", nd.Name)
	}
	o, err := lk.Enrich(b)
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", nd.Name, err)
	}
	return o, nil
}

// streamedGraph returns the processed epoch of a graph whose outputs were
// streamed (nil when they were not): nothing is left to run or write but
// the parts.
func (r *Runner) streamedGraph(results []*fileResult) *processed {
	for _, res := range results {
		if res.streamed == nil {
			continue
		}
		n := max(1, r.Parallelism)
		return &processed{Out: make([][]arrow.RecordBatch, n), outRows: make([]int64, n), changed: make([]bool, n),
			Graph: &graphOut{Late: map[string][][]arrow.RecordBatch{}, changed: map[string][]bool{}}, streamed: res.streamed}
	}
	return nil
}

// lookupsFor loads the lookup tables an epoch's rows go through: a
// streamed epoch loaded them before it decoded (decodeForCommit).
func (r *Runner) lookupsFor(ctx context.Context, results []*fileResult) error {
	if r.streamsFiles(len(results)) {
		return nil
	}
	return r.RefreshLookups(ctx)
}
