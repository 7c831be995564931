package manifest

import "strconv"

// KafkaOffsetsVersion is the version of SourceState.Kafka written; a
// reader refuses any other (the block is versioned on its own, like the
// state plan, so that it can change without a manifest format bump).
const KafkaOffsetsVersion = 1

// KafkaOffsets is the source position of a kafka source: per partition the
// next offset to read (the offset after the last one a committed epoch
// consumed, or where a partition new to the pipeline starts). An epoch's
// records are exactly those between its parent's offsets and its own.
// Added within format 2 as an optional field (§3.2 of docs/design.md):
// manifests without it read as before.
//
// In the graph form a pipeline may have several kafka sources (sources:
// with type: kafka): each partition names the source it belongs to
// (Source), and one block holds them all.
type KafkaOffsets struct {
	Version int `json:"version"`
	// Partitions are sorted by source, topic, then partition, each once.
	Partitions []KafkaPartition `json:"partitions"`
	// Skipped counts the offsets skipped because the log no longer held
	// them (on_missing_offsets: skip), over the pipeline's life and all
	// its kafka sources.
	Skipped int64 `json:"skipped,omitempty"`
}

// KafkaPartition is one partition's position.
type KafkaPartition struct {
	// Source is the named source (graph form) the partition is read by;
	// empty in the linear form. Two sources may read the same partition,
	// each from its own offsets.
	Source    string `json:"source,omitempty"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Next is the next offset to read.
	Next int64 `json:"next"`
	// High is the partition's high watermark when the epoch was planned
	// (informational: lag = High - Next; never used to decide).
	High int64 `json:"high,omitempty"`
}

func (v *validator) kafkaOffsets(k *KafkaOffsets) {
	if k == nil {
		return
	}
	if k.Version != KafkaOffsetsVersion {
		v.fail("source.kafka.version", "%d: this release reads kafka offsets version %d", k.Version, KafkaOffsetsVersion)
		return
	}
	v.nonNegative("source.kafka.skipped", k.Skipped)
	for i, p := range k.Partitions {
		f := "source.kafka.partitions[" + strconv.Itoa(i) + "]"
		switch {
		case p.Topic == "":
			v.fail(f+".topic", "empty")
		case p.Partition < 0:
			v.fail(f+".partition", "%d is negative", p.Partition)
		case p.Next < 0:
			v.fail(f+".next", "%d is negative", p.Next)
		case p.High < 0:
			v.fail(f+".high", "%d is negative", p.High)
		}
		if i > 0 {
			if q := k.Partitions[i-1]; !q.Before(p) {
				v.fail(f, "%s is not after %s (partitions are sorted by source, topic and partition, each once)", p, q)
			}
		}
	}
}

// Before reports whether p sorts before q: by source, topic, then
// partition.
func (p KafkaPartition) Before(q KafkaPartition) bool {
	if p.Source != q.Source {
		return p.Source < q.Source
	}
	if p.Topic != q.Topic {
		return p.Topic < q.Topic
	}
	return p.Partition < q.Partition
}

// String names the partition: "topic/partition", after "source:" in the
// graph form.
func (p KafkaPartition) String() string {
	s := p.Topic + "/" + strconv.Itoa(int(p.Partition))
	if p.Source != "" {
		s = p.Source + ":" + s
	}
	return s
}
