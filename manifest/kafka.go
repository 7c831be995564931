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
type KafkaOffsets struct {
	Version int `json:"version"`
	// Partitions are sorted by topic, then partition, each once.
	Partitions []KafkaPartition `json:"partitions"`
	// Skipped counts the offsets skipped because the log no longer held
	// them (on_missing_offsets: skip), over the pipeline's life.
	Skipped int64 `json:"skipped,omitempty"`
}

// KafkaPartition is one partition's position.
type KafkaPartition struct {
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
			q := k.Partitions[i-1]
			if q.Topic > p.Topic || q.Topic == p.Topic && q.Partition >= p.Partition {
				v.fail(f, "%s/%d is not after %s/%d (partitions are sorted, each once)", p.Topic, p.Partition, q.Topic, q.Partition)
			}
		}
	}
}
