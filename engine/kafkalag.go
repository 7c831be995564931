package engine

import (
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/kafka"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// PartitionLag is one partition's position and lag: the high watermark
// minus the committed offset (what status, history and metrics show).
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	High      int64  `json:"high"`
	Lag       int64  `json:"lag"`
}

// lagOf returns the lags of m's offsets against high (nil: the high
// watermarks m recorded when it was planned).
func lagOf(ko *manifest.KafkaOffsets, high map[kafka.Partition]kafka.Watermarks) ([]PartitionLag, int64) {
	if ko == nil {
		return nil, 0
	}
	var out []PartitionLag
	var total int64
	seen := map[kafka.Partition]bool{}
	for _, p := range ko.Partitions {
		kp := kafka.Partition{Topic: p.Topic, Partition: p.Partition}
		seen[kp] = true
		h := p.High
		if w, ok := high[kp]; ok {
			h = w.High
		}
		l := PartitionLag{Topic: p.Topic, Partition: p.Partition, Committed: p.Next, High: h, Lag: max(0, h-p.Next)}
		total += l.Lag
		out = append(out, l)
	}
	// Partitions the broker has and the manifest does not yet (added
	// since): all of them is lag, from their low watermark.
	var fresh []kafka.Partition
	for kp := range high {
		if !seen[kp] {
			fresh = append(fresh, kp)
		}
	}
	kafka.SortPartitions(fresh)
	for _, kp := range fresh {
		w := high[kp]
		l := PartitionLag{Topic: kp.Topic, Partition: kp.Partition, Committed: w.Low, High: w.High, Lag: max(0, w.High-w.Low)}
		total += l.Lag
		out = append(out, l)
	}
	return out, total
}

// kafkaStatus fills the per-partition lag of a status from the broker's
// high watermarks now (after the pending listing asked for them).
func (s *Status) kafkaStatus(src store.Store, head *epoch.Head) {
	ks, ok := src.(*kafka.Source)
	if !ok {
		return
	}
	var ko *manifest.KafkaOffsets
	if head != nil && head.Manifest != nil {
		ko = head.Manifest.Source.Kafka
	}
	if ko == nil {
		ko = &manifest.KafkaOffsets{}
	}
	parts, total := lagOf(ko, ks.Watermarks())
	s.KafkaPartitions, s.KafkaLag = parts, &total
}
