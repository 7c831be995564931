package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/decide"
	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Streaming an epoch in bounded memory, for every plan without a keyed
// stage: the linear form without a window, and the graph form whose stages
// are all filter, project and lookup stages (graphstream.go). The run loop's epoch
// begins its attempt before it decodes (attemptFor hands the same attempt
// to the commit); files are decoded in order, a few ahead (bounded by count
// and by a quarter of the memory budget), each handed over batch by batch
// (formats.DecodeStream); the batches are filtered and projected (in a
// graph, run through the stateless nodes to every sink that reads them)
// and encoded into the current output part of each sink, which is written,
// attempt-tagged, once it holds partBytes. The parts are sink files like any other: listed
// in the manifest when the epoch commits, orphans for retention to delete
// if it does not.
//
// Part names reuse the subtask slot of the output name for the part number
// (part-g…-e…-s0000-<attempt8>, -s0001-, …): a plan without a keyed stage
// writes every row as subtask 0's, so the slot is free, and every reader of
// output names (retention, floe outputs, verify) keeps working unchanged.
// Each sink directory (a graph's further sink, a Hive partition, an Iceberg
// day) numbers its own parts.
//
// A file that fails to decode after some of its rows were written (a corrupt
// Parquet page) cannot be taken back out of a part. The epoch then starts
// over under a new attempt with that file rejected whole, as the
// whole-file decoder would have: the outputs equal an unstreamed epoch's.

// streamOut is what a streamed epoch wrote before its commit.
type streamOut struct {
	att  *epoch.Attempt
	refs []manifest.FileRef
}

// decodeForCommit decodes the files of an epoch the run loop commits:
// files is a prefix of pend, the pending list. A plan without a keyed
// stage streams its outputs while decoding (the results carry them);
// others decode as decodeEpoch does.
func (r *Runner) decodeForCommit(ctx context.Context, files, pend []store.ObjectInfo) ([]*fileResult, error) {
	r.noteMemorySplit(files, pend)
	if !r.streamsFiles(len(files)) {
		return r.DecodeEpoch(ctx, files)
	}
	// A graph's lookup tables are loaded before rows go through them.
	if err := r.RefreshLookups(ctx); err != nil {
		return nil, err
	}
	return r.streamEpoch(ctx, files)
}

// streamsEpochs reports whether the plan has no keyed stage: its epochs
// stream (the decide config's streams says the same of the spec).
func (r *Runner) streamsEpochs() bool {
	return len(r.Plan.Graph.State) == 0
}

// streamsFiles reports whether an epoch of n files streams.
func (r *Runner) streamsFiles(n int) bool {
	return r.streamsEpochs() && !r.SkipRead && n > 0
}

// attemptFor returns the attempt that writes an epoch: the one that
// streamed its outputs, else a new one (after beginWriting).
func (r *Runner) attemptFor(ctx context.Context, results []*fileResult) (*epoch.Attempt, error) {
	for _, res := range results {
		if res.streamed != nil {
			return res.streamed.att, nil
		}
	}
	if err := r.beginWriting(ctx); err != nil {
		return nil, err
	}
	return r.C.BeginAt(r.head, r.gen.Generation, r.epochFloor), nil
}

// noteMemorySplit says, once per run at info (then at debug), that the
// memory budget cut the epoch's files.
func (r *Runner) noteMemorySplit(files, pend []store.ObjectInfo) {
	cut := r.Dc.MemorySplit(pend[:r.Dc.Limit(pend)])
	if !cut.Split || cut.Files != len(files) {
		return
	}
	level := "debug"
	if r.Dc.SplitNoted != nil && r.Dc.SplitNoted.CompareAndSwap(false, true) {
		level = "info"
	}
	args := []any{"files", cut.Files, "offered", cut.Offered, "estimated", spec.FormatSize(cut.Estimate),
		"budget", spec.FormatSize(cut.Budget), "memory_limit", spec.FormatSize(r.Dc.MemLimit), "limit_from", r.Dc.MemFrom}
	msg := "epoch split because of state.memory_limit: its files would decode to more than half the budget at once; the rest follow in the next epochs"
	if level == "info" {
		r.Log.Info(msg, args...)
	} else {
		r.Log.Debug(msg, args...)
	}
}

// midFileError: a file failed to decode after some of its rows were
// handed over.
type midFileError struct {
	key string
	err error
}

func (e *midFileError) Error() string {
	return fmt.Sprintf("source file %s: decoding failed after some of its rows were written: %v", e.key, e.err)
}

func (e *midFileError) Unwrap() error { return e.err }

// streamEpoch streams files into output parts, starting over with a file
// rejected whole when it fails to decode midway.
func (r *Runner) streamEpoch(ctx context.Context, files []store.ObjectInfo) ([]*fileResult, error) {
	bad := map[string]error{}
	for {
		results, err := r.streamOnce(ctx, files, bad)
		var mf *midFileError
		if errors.As(err, &mf) && bad[mf.key] == nil {
			bad[mf.key] = mf.err
			r.Log.Warn("a source file failed to decode after some of its rows were written; the epoch starts again with the file rejected whole (what was written is an orphan, removed by retention)",
				"file", mf.key, "error", mf.err)
			continue
		}
		return results, err
	}
}

// streamBatch is a batch on its way to sink target to of a streamed epoch
// (partSink.targets: 0 is the root sink).
type streamBatch struct {
	to int
	b  arrow.RecordBatch
}

// decodeJob is one file decoding ahead of the writer.
type decodeJob struct {
	f       store.ObjectInfo
	batches chan streamBatch // after the stateless stages; closed when done
	res     *fileResult      // set before batches is closed
	err     error
}

// streamOnce runs one try of a streamed epoch under a new attempt, begun
// (after beginWriting) when the first rows are about to be written: an
// epoch that fails or keeps no row before then has written nothing.
func (r *Runner) streamOnce(parent context.Context, files []store.ObjectInfo, bad map[string]error) ([]*fileResult, error) {
	out := &streamOut{}
	var sink *partSink
	begin := func() error {
		if sink != nil {
			return nil
		}
		if err := r.beginWriting(parent); err != nil {
			return err
		}
		out.att = r.C.BeginAt(r.head, r.gen.Generation, r.epochFloor)
		sink = newPartSink(parent, r, out.att)
		return nil
	}
	var err error
	ctx, cancel := context.WithCancel(parent)
	defer cancel()

	// Decoders: in file order, at most `ahead` files and a quarter of the
	// budget (estimated) at once; the first file always fits.
	ahead := max(2, runtime.GOMAXPROCS(0))
	par := max(1, runtime.GOMAXPROCS(0)/min(ahead, len(files)))
	capBytes := max(r.Dc.MemLimit/4, 1)
	if r.Dc.MemLimit <= 0 {
		capBytes = math.MaxInt64
	}
	mem := semaphore.NewWeighted(capBytes)
	slots := make(chan struct{}, ahead)
	jobs := make(chan *decodeJob, ahead)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(jobs)
		for _, f := range files {
			w := min(r.Dc.Estimate(f), capBytes)
			if mem.Acquire(ctx, w) != nil {
				return
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				mem.Release(w)
				return
			}
			j := &decodeJob{f: f, batches: make(chan streamBatch, 2)}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots; mem.Release(w) }()
				r.runDecodeJob(ctx, j, par, bad)
			}()
			select {
			case jobs <- j:
			case <-ctx.Done():
				return
			}
		}
	}()

	results := make([]*fileResult, 0, len(files))
	caps := sources.NewRowCaps(r.P)
	for j := range jobs {
		for b := range j.batches {
			if err == nil {
				err = begin()
			}
			if err == nil {
				err = sink.write(b)
			}
			if err != nil {
				break
			}
		}
		if err == nil {
			err = j.err
		}
		if err != nil {
			break
		}
		results = append(results, j.res)
		if caps.Add(j.res.key, j.res.rows) {
			break // the row limit ends the epoch after this file
		}
	}
	cancel()
	wg.Wait()
	if err != nil {
		if sink != nil {
			sink.abort()
		}
		return nil, err
	}
	if sink == nil {
		return results, nil // no row to write: the epoch's attempt begins as an unstreamed one's
	}
	if out.refs, err = sink.finish(); err != nil {
		return nil, err
	}
	for _, res := range results {
		res.streamed = out
	}
	return results, nil
}

// runDecodeJob decodes one file into j.batches (a prefetched result if
// there is one), then sets j.res or j.err and closes j.batches.
func (r *Runner) runDecodeJob(ctx context.Context, j *decodeJob, par int, bad map[string]error) {
	defer close(j.batches)
	send := func(b streamBatch) error {
		select {
		case j.batches <- b:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err, ok := bad[j.f.Key]; ok {
		j.res, j.err = r.undecodable(j.f.Key, err)
		return
	}
	if r.pf != nil {
		if res, err, ok := r.pf.Take(ctx, j.f.Key); ok {
			if err != nil {
				j.err = err
				return
			}
			for _, b := range res.batches {
				// Prefetched batches are the rows of the end of their
				// source's decode chain (counted already).
				_, _, j.err = r.routeGraph(res.node, b, send)
				if j.err != nil {
					return
				}
			}
			res.batches = nil
			j.res = res
			return
		}
	}
	j.res, j.err = r.streamFile(ctx, j.f, par, send)
}

// streamFile decodes one file batch by batch, runs the stateless stages
// and sends what they keep: decodeFile's result without the batches.
func (r *Runner) streamFile(ctx context.Context, f store.ObjectInfo, par int, send func(streamBatch) error) (*fileResult, error) {
	// The file is decoded by the source it belongs to.
	node, err := r.streamSourceOf(f.Key)
	if err != nil {
		return nil, err
	}
	src, schema, tsSchema := &node.Src.Source, node.Out, node.Out
	sparse, err := r.readColumns(ctx, f, src.Format, schema)
	if err != nil {
		return nil, err
	}
	var data []byte
	if sparse == nil {
		if data, err = r.readSource(ctx, f.Key); err != nil {
			return nil, err
		}
	}
	res := &fileResult{key: f.Key, maxTS: math.MinInt64}
	startAt := int64(math.MinInt64)
	if start, _, _ := src.StartTime(); !start.IsZero() && !kafkaIgnoresStartTime(src) {
		startAt = start.UnixMicro()
	}
	tsCol := tsSchema.FieldIndices(src.EventTime)[0]
	// With start_from, a file whose rows are all older is skipped whole: its
	// batches wait until one row is recent enough to keep the file.
	var held []arrow.RecordBatch
	kept := startAt == math.MinInt64
	sent := 0
	var cbErr error
	pass := func(b arrow.RecordBatch) error {
		n, dropped, err := r.routeGraph(node, b, send)
		sent += n
		res.filtered += dropped
		return err
	}
	decode := func(each func(arrow.RecordBatch) error) (*formats.Decoded, error) {
		opts := sources.DecodeOptions(src, schema, r.Mem, par)
		if sparse != nil {
			return formats.DecodeParquetStreamAt(f.Key, sparse, opts, each)
		}
		return formats.DecodeStream(string(src.Format), f.Key, data, opts, each)
	}
	d, err := decode(func(b arrow.RecordBatch) error {
		res.maxTS = max(res.maxTS, maxEventTime(b, tsCol))
		if kept {
			cbErr = pass(b)
			return cbErr
		}
		held = append(held, b)
		if res.maxTS < startAt {
			return nil
		}
		kept = true
		for _, h := range held {
			if cbErr = pass(h); cbErr != nil {
				return cbErr
			}
		}
		held = nil
		return nil
	})
	switch {
	case cbErr != nil:
		return nil, cbErr
	case err != nil && sent > 0 && r.onErrorOf(f.Key) != spec.OnErrorFail:
		return nil, &midFileError{key: f.Key, err: err}
	case err != nil:
		return r.undecodable(f.Key, err)
	}
	if err := r.checkDecoded(res, d); err != nil {
		return nil, err
	}
	kafkaRejects(res, src, r.P)
	if !kept {
		// start_from: every row of the file is older: skip it (it counts as
		// read, its rows as filtered).
		return &fileResult{key: f.Key, maxTS: math.MinInt64, rows: d.Rows, filtered: d.Rows, rejects: d.Rejects}, nil
	}
	return res, nil
}

// maxEventTime returns the largest valid value of timestamp column col.
func maxEventTime(b arrow.RecordBatch, col int) int64 {
	m := int64(math.MinInt64)
	ts := b.Column(col).(*array.Timestamp)
	for i, v := range ts.Values() {
		if int64(v) > m && ts.IsValid(i) {
			m = int64(v)
		}
	}
	return m
}

// sinkTarget is one sink of a streamed epoch: where its parts go and how
// they are encoded.
type sinkTarget struct {
	dir    string              // "" for the root sink, "@<name>" for a further sink of a graph (sinks.Mux)
	where  string              // the sink's spec field, for errors
	format spec.Format         // of its files
	schema *arrow.Schema       // of its files (without Hive partition columns)
	parts  *dataflow.HiveParts // its Hive partitioning (nil: none)
	table  *tableSink          // the root sink's Iceberg table (nil: none)
}

// streamTargets returns the sinks a streamed epoch writes: the root sink,
// then a graph's further sinks in spec order (dataflow.GraphPlan.Extra).
func (r *Runner) streamTargets() []sinkTarget {
	ts := []sinkTarget{{where: "sink", format: r.P.RootSink().Format, schema: r.Plan.SinkParts.Schema(r.Plan.Output), parts: r.Plan.SinkParts, table: r.table}}
	for i, sk := range dataflow.ExtraSinks(r.P) {
		h := r.Plan.ExtraPartsOf(i)
		ts = append(ts, sinkTarget{dir: owner.ExtraSinkDir(sk.Name), where: "sinks." + sk.Name, format: sk.Sink.Format,
			schema: h.Schema(r.Plan.Graph.Extra[i].Out), parts: h})
	}
	return ts
}

// groups splits rows for t's files by directory: an Iceberg table's data/
// (one day each when day-partitioned), a Hive partition's, or t's own.
func (t *sinkTarget) groups(o arrow.RecordBatch, mem memory.Allocator) (map[string][]arrow.RecordBatch, error) {
	if tb := t.table; tb != nil {
		if tb.partCol < 0 {
			return map[string][]arrow.RecordBatch{"data": {o}}, nil
		}
		byDay, err := sinks.SplitByPartition([]arrow.RecordBatch{o}, tb.partCol, tb.transform, mem)
		if err != nil {
			return nil, err
		}
		groups := map[string][]arrow.RecordBatch{}
		for dir, g := range byDay {
			groups["data/"+dir] = g
		}
		return groups, nil
	}
	groups, err := sinks.Groups(t.parts, t.dir, []arrow.RecordBatch{o}, mem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.where, err)
	}
	return groups, nil
}

// partSink encodes a streamed epoch's output into parts of about partBytes,
// one open part per sink directory (per sink: one, one per partition of an
// Iceberg table, or one per Hive partition directory; together they share
// the bound), and writes each finished part in the background, one at a
// time.
type partSink struct {
	r       *Runner
	att     *epoch.Attempt
	limit   int64
	targets []sinkTarget
	open    map[string]*formats.PartEncoder
	ext     map[string]string // file extension per open directory
	next    map[string]int    // next part number per directory
	up      *errgroup.Group
	upCtx   context.Context
	mu      sync.Mutex
	refs    []manifest.FileRef
	// inflight is closed when the part being written is written.
	inflight chan struct{}
}

func newPartSink(ctx context.Context, r *Runner, att *epoch.Attempt) *partSink {
	s := &partSink{r: r, att: att, limit: decide.PartBytes(r.Dc.MemLimit), targets: r.streamTargets(),
		open: map[string]*formats.PartEncoder{}, ext: map[string]string{}, next: map[string]int{}}
	s.up, s.upCtx = errgroup.WithContext(ctx)
	s.up.SetLimit(1)
	return s
}

// write encodes b's rows (routeGraph ran the stages) into the open parts
// of its sink, rolling those that are full.
func (s *partSink) write(b streamBatch) error {
	if err := s.upCtx.Err(); err != nil {
		if werr := s.up.Wait(); werr != nil {
			return werr
		}
		return err
	}
	r, t := s.r, &s.targets[b.to]
	o := b.b
	if o.NumRows() == 0 {
		return nil
	}
	groups, err := t.groups(o, r.Mem)
	if err != nil {
		return err
	}
	for _, dir := range SortedKeys(groups) {
		enc := s.open[dir]
		if enc == nil {
			opts := formats.EncodeOptions{Mem: r.Mem, Compression: "snappy"}
			format := "parquet"
			if t.format == spec.JSONL {
				format = "jsonl"
			}
			if enc, err = formats.NewPartEncoder(format, t.schema, opts); err != nil {
				return err
			}
			s.open[dir], s.ext[dir] = enc, format
		}
		for _, g := range groups[dir] {
			if err := enc.Write(g); err != nil {
				return err
			}
		}
		if enc.Size() >= s.limit {
			if err := s.roll(dir); err != nil {
				return err
			}
		}
	}
	// Many open parts (a backfill over many days) share the bound: the
	// largest goes first.
	for {
		var total, biggest int64
		big, found := "", false
		for _, dir := range SortedKeys(s.open) {
			sz := s.open[dir].Size()
			total += sz
			if !found || sz > biggest {
				biggest, big, found = sz, dir, true
			}
		}
		if !found || total < s.limit {
			return nil
		}
		if err := s.roll(big); err != nil {
			return err
		}
	}
}

// roll finishes dir's open part and writes it in the background.
func (s *partSink) roll(dir string) error {
	enc := s.open[dir]
	delete(s.open, dir)
	if enc == nil || enc.Rows() == 0 {
		if enc != nil {
			enc.Abort()
		}
		return nil
	}
	n, ext := s.next[dir], s.ext[dir]
	s.next[dir]++
	rows := enc.Rows()
	// The part in flight is written before this one is laid out in one
	// piece: at most one finished part and one being filled are in memory.
	if s.inflight != nil {
		select {
		case <-s.inflight:
		case <-s.upCtx.Done():
		}
	}
	data, err := enc.Finish()
	if err != nil {
		return err
	}
	done := make(chan struct{})
	s.inflight = done
	s.up.Go(func() error {
		defer close(done)
		ref, err := s.att.WriteOutput(s.upCtx, dir, n, ext, data, rows)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.refs = append(s.refs, ref)
		s.mu.Unlock()
		return nil
	})
	return nil
}

// finish writes the open parts and waits for every write; it returns the
// parts' references.
func (s *partSink) finish() ([]manifest.FileRef, error) {
	for _, dir := range SortedKeys(s.open) {
		if err := s.roll(dir); err != nil {
			s.abort()
			return nil, err
		}
	}
	if err := s.up.Wait(); err != nil {
		return nil, err
	}
	sort.Slice(s.refs, func(i, j int) bool { return s.refs[i].Path < s.refs[j].Path })
	return s.refs, nil
}

// abort drops the open parts and waits for writes in flight; what they
// wrote stays an orphan.
func (s *partSink) abort() {
	for dir, enc := range s.open {
		enc.Abort()
		delete(s.open, dir)
	}
	_ = s.up.Wait()
}

func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
