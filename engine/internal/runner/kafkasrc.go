package runner

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/kafka"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// The kafka source (docs/design.md §5.11).
//
// A kafka.Source is the run's source store: it lists the offset ranges
// between the committed offsets and the partitions' high watermarks as
// files "<topic>/<partition>/<from>-<to>" (cut into epochs of at most
// max_records_per_epoch) and reads a range as one line per offset, so the
// decode, reject, watermark and commit steps are those of files. What
// differs is in this file and the hooks that call it:
//   - the position is the offsets per partition in the manifest
//     (Source.Kafka), not the processed-file set, which a kafka source
//     leaves empty (prepareEdit);
//   - each partition is one watermark input (decide.Config.inputOf), so an
//     idle partition stops holding the watermark back after idle_timeout;
//   - max_records_per_epoch takes whole listed ranges up to the bound
//     (decide.Config.Limit);
//   - a rejected record names its topic/partition as the file and its
//     offset as the line (kafkaRejects);
//   - start_from: latest is the files' rule (the first run marks what is
//     there read without reading it, committing those offsets); a time
//     starts new partitions at the broker's offset for that time, and rows
//     after it are never dropped by their event time.

// isKafka reports whether p reads a kafka source in the linear form.
func isKafka(p *spec.Pipeline) bool { return !IsGraph(p) && p.Source.Type == spec.SourceKafka }

// In the graph form each named kafka source is a kafka.Source in the
// combined store (sources.Mux): its keys are "<name>/<range key>", each of
// its partitions is an input "<name>/<topic>/<partition>", and the
// manifest's offsets name the source of every partition
// (manifest.KafkaPartition.Source). What follows works on every kafka
// source of the run (sources.KafkaOf), in either form.

// setKafkaCommitted tells the kafka sources of src which offsets their
// listing starts from: those of the manifest the run continues (the
// head's, or the restored epoch's).
func setKafkaCommitted(src store.Store, head *epoch.Head, from *RestoreSource, log *slog.Logger) {
	var m *manifest.Manifest
	if head != nil {
		m = head.Manifest
	}
	if from != nil && from.Kind != "" && from.Manifest != nil {
		m = from.Manifest
	}
	srcs := sources.KafkaOf(src)
	for _, k := range srcs {
		k.Source.SetCommitted(sources.KafkaOffsetsOf(m, k.Name))
	}
	if log != nil && m != nil && m.Source.Kafka != nil {
		// Offsets of a kafka source the spec no longer has (renamed, or
		// removed; or the spec moved between the linear and the graph
		// form): a source without offsets of its own starts at its
		// start_from, so a renamed one reads its topics again.
		gone := map[string]bool{}
		for _, p := range m.Source.Kafka.Partitions {
			if !slices.ContainsFunc(srcs, func(k sources.NamedKafka) bool { return k.Name == p.Source }) {
				gone[p.Source] = true
			}
		}
		for name := range gone {
			log.Warn("the committed kafka offsets name a source the pipeline no longer reads: they are dropped, and a kafka source without offsets starts at its start_from (a renamed source reads its topics again)",
				"source", cmp.Or(name, "source (the linear form)"))
		}
	}
}

// kafkaSources returns the run's kafka sources (none for files only).
func (r *Runner) kafkaSources() []sources.NamedKafka { return sources.KafkaOf(r.St.Source) }

// kafkaKey reports whether a listed key is a kafka source's range.
func (r *Runner) kafkaKey(key string) bool {
	for _, k := range r.kafkaSources() {
		if _, ok := k.RangeKey(key); ok {
			return true
		}
	}
	return false
}

// kafkaManifest records in m the offsets after the epoch that consumed
// files: the sources' bases advanced by their ranges.
func (r *Runner) kafkaManifest(m *manifest.Manifest, files []store.ObjectInfo) {
	if ko := r.kafkaOffsets(files, true); ko != nil {
		m.Source.Kafka = ko
	}
}

// kafkaOffsets returns the offsets after an epoch that consumes files:
// each kafka source's base advanced by its ranges, with the high
// watermarks of its last listing. withSkipped adds the offsets this
// process found gone reading them; a decision leaves them out (its
// proposer has not read the files: each worker reports its own,
// manifest.WorkerPart.KafkaSkipped). Nil when no source is kafka.
func (r *Runner) kafkaOffsets(files []store.ObjectInfo, withSkipped bool) *manifest.KafkaOffsets {
	srcs := r.kafkaSources()
	if len(srcs) == 0 {
		return nil
	}
	ko := &manifest.KafkaOffsets{Version: manifest.KafkaOffsetsVersion}
	for i, k := range srcs {
		base, skipped := k.Source.Base()
		if i == 0 {
			ko.Skipped = skipped // the pipeline's total: every source carries it
		}
		var rs []kafka.Range
		for _, f := range files {
			key, ok := k.RangeKey(f.Key)
			if !ok {
				continue
			}
			rg, err := kafka.ParseKey(key)
			if err != nil {
				continue // not a range key: never listed by a kafka source
			}
			rs = append(rs, rg)
			if withSkipped {
				ko.Skipped += k.Source.Skipped(key)
			}
		}
		next := kafka.Advance(base, rs)
		wms := k.Source.Watermarks()
		parts := make([]kafka.Partition, 0, len(next))
		for p := range next {
			parts = append(parts, p)
		}
		kafka.SortPartitions(parts)
		for _, p := range parts {
			ko.Partitions = append(ko.Partitions, manifest.KafkaPartition{Source: k.Name, Topic: p.Topic, Partition: p.Partition,
				Next: next[p], High: max(0, wms[p].High)})
		}
	}
	return ko
}

// kafkaSkipped is the offsets this process found gone reading files.
func (r *Runner) kafkaSkipped(files []store.ObjectInfo) int64 {
	var n int64
	for _, k := range r.kafkaSources() {
		for _, f := range files {
			if key, ok := k.RangeKey(f.Key); ok {
				n += k.Source.Skipped(key)
			}
		}
	}
	return n
}

// kafkaCommitted moves the sources' committed offsets to m's, once m is
// committed.
func (r *Runner) kafkaCommitted(m *manifest.Manifest) {
	for _, k := range r.kafkaSources() {
		k.Source.SetCommitted(sources.KafkaOffsetsOf(m, k.Name))
	}
}

// kafkaRejects rewrites the rejects of a decoded range of src (the source
// that listed it): the file is the record's "<topic>/<partition>" (after
// "<name>/" in the graph form) and the line its offset (line N of a range
// file is offset from+N-1).
func kafkaRejects(res *fileResult, src *spec.Source, p *spec.Pipeline) {
	if src.Type != spec.SourceKafka || len(res.rejects) == 0 {
		return
	}
	prefix, key := "", res.key
	if IsGraph(p) {
		name, rest, _ := strings.Cut(res.key, "/")
		prefix, key = name+"/", rest
	}
	rg, err := kafka.ParseKey(key)
	if err != nil {
		return
	}
	name := prefix + kafka.InputOf(key)
	for i := range res.rejects {
		rj := &res.rejects[i]
		rj.File = name
		if rj.Line > 0 {
			rj.Line = rg.From + rj.Line - 1
		}
	}
}

// kafkaIgnoresStartTime: a kafka source's start_from time picks offsets,
// it never drops rows by event time.
func kafkaIgnoresStartTime(src *spec.Source) bool { return src.Type == spec.SourceKafka }

// RefuseKafka refuses what a kafka source does not support yet (replay,
// bundles, reprocess: they work on the processed-file set and captured
// files, which a kafka source does not keep).
func RefuseKafka(p *spec.Pipeline, what string) error {
	if !sources.HasKafka(p) {
		return nil
	}
	return fmt.Errorf("%s: not supported for a kafka source yet (it records offsets, not input files); rollback --to-epoch re-reads from an epoch's offsets while the log still holds them", what)
}

// SetKafkaCommitted is setKafkaCommitted for the read-only tools (status):
// src's listing starts from head's offsets.
func SetKafkaCommitted(src store.Store, head *epoch.Head) { setKafkaCommitted(src, head, nil, nil) }

// HasKafka reports whether p reads a kafka source, in either form.
func HasKafka(p *spec.Pipeline) bool { return sources.HasKafka(p) }
