package runner

import (
	"fmt"

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

// isKafka reports whether p reads a kafka source (the linear form).
func isKafka(p *spec.Pipeline) bool { return !IsGraph(p) && p.Source.Type == spec.SourceKafka }

// setKafkaCommitted tells a kafka source which offsets its listing starts
// from: those of the manifest the run continues (the head's, or the
// restored epoch's).
func setKafkaCommitted(src store.Store, head *epoch.Head, from *RestoreSource) {
	ks, ok := src.(*kafka.Source)
	if !ok {
		return
	}
	var m *manifest.Manifest
	if head != nil {
		m = head.Manifest
	}
	if from != nil && from.Kind != "" && from.Manifest != nil {
		m = from.Manifest
	}
	ks.SetCommitted(sources.KafkaOffsetsOf(m))
}

func (r *Runner) kafkaSource() *kafka.Source {
	ks, _ := r.St.Source.(*kafka.Source)
	return ks
}

// kafkaManifest records in m the offsets after the epoch that consumed
// files: the source's base advanced by their ranges.
func (r *Runner) kafkaManifest(m *manifest.Manifest, files []store.ObjectInfo) {
	if ko := r.kafkaOffsets(files, true); ko != nil {
		m.Source.Kafka = ko
	}
}

// kafkaOffsets returns, for a kafka source, the offsets after an epoch
// that consumes files: the source's base advanced by their ranges, with
// the high watermarks of its last listing. withSkipped adds the offsets
// this process found gone reading them; a decision leaves them out (its
// proposer has not read the files: each worker reports its own,
// manifest.WorkerPart.KafkaSkipped). Nil when the source is not kafka.
func (r *Runner) kafkaOffsets(files []store.ObjectInfo, withSkipped bool) *manifest.KafkaOffsets {
	ks := r.kafkaSource()
	if ks == nil {
		return nil
	}
	base, skipped := ks.Base()
	var rs []kafka.Range
	for _, f := range files {
		rg, err := kafka.ParseKey(f.Key)
		if err != nil {
			continue // not a range key: never listed by a kafka source
		}
		rs = append(rs, rg)
		if withSkipped {
			skipped += ks.Skipped(f.Key)
		}
	}
	next := kafka.Advance(base, rs)
	wms := ks.Watermarks()
	parts := make([]kafka.Partition, 0, len(next))
	for p := range next {
		parts = append(parts, p)
	}
	kafka.SortPartitions(parts)
	ko := &manifest.KafkaOffsets{Version: manifest.KafkaOffsetsVersion, Skipped: skipped}
	for _, p := range parts {
		ko.Partitions = append(ko.Partitions, manifest.KafkaPartition{Topic: p.Topic, Partition: p.Partition, Next: next[p], High: max(0, wms[p].High)})
	}
	return ko
}

// kafkaSkipped is the offsets this process found gone reading files.
func (r *Runner) kafkaSkipped(files []store.ObjectInfo) int64 {
	ks := r.kafkaSource()
	if ks == nil {
		return 0
	}
	var n int64
	for _, f := range files {
		n += ks.Skipped(f.Key)
	}
	return n
}

// kafkaCommitted moves the source's committed offsets to m's, once m is
// committed.
func (r *Runner) kafkaCommitted(m *manifest.Manifest) {
	if ks := r.kafkaSource(); ks != nil {
		ks.SetCommitted(sources.KafkaOffsetsOf(m))
	}
}

// kafkaRejects rewrites the rejects of a decoded range: the file is the
// record's "<topic>/<partition>" and the line its offset (line N of a
// range file is offset from+N-1).
func kafkaRejects(res *fileResult, p *spec.Pipeline) {
	if !isKafka(p) || len(res.rejects) == 0 {
		return
	}
	rg, err := kafka.ParseKey(res.key)
	if err != nil {
		return
	}
	name := kafka.InputOf(res.key)
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
func kafkaIgnoresStartTime(p *spec.Pipeline) bool { return isKafka(p) }

// RefuseKafka refuses what a kafka source does not support yet (replay,
// bundles, reprocess: they work on the processed-file set and captured
// files, which a kafka source does not keep).
func RefuseKafka(p *spec.Pipeline, what string) error {
	if !isKafka(p) {
		return nil
	}
	return fmt.Errorf("%s: not supported for a kafka source yet (it records offsets, not input files); rollback --to-epoch re-reads from an epoch's offsets while the log still holds them", what)
}

// SetKafkaCommitted is setKafkaCommitted for the read-only tools (status):
// src's listing starts from head's offsets.
func SetKafkaCommitted(src store.Store, head *epoch.Head) { setKafkaCommitted(src, head, nil) }
