package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/kafka"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// PartitionLag is one partition's position and lag: the high watermark
// minus the committed offset (what status, history and metrics show).
// Source names the graph form's kafka source (empty in the linear form).
type PartitionLag struct {
	Source    string `json:"source,omitempty"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	High      int64  `json:"high"`
	Lag       int64  `json:"lag"`
}

// Name is the partition as status prints it: "topic/partition", after
// "source:" in the graph form.
func (l PartitionLag) Name() string {
	s := fmt.Sprintf("%s/%d", l.Topic, l.Partition)
	if l.Source != "" {
		s = l.Source + ":" + s
	}
	return s
}

// sourcePartition is a partition of one kafka source.
type sourcePartition struct {
	source string
	kafka.Partition
}

// lagOf returns the lags of m's offsets against high (nil: the high
// watermarks m recorded when it was planned).
func lagOf(ko *manifest.KafkaOffsets, high map[sourcePartition]kafka.Watermarks) ([]PartitionLag, int64) {
	if ko == nil {
		return nil, 0
	}
	var out []PartitionLag
	var total int64
	seen := map[sourcePartition]bool{}
	for _, p := range ko.Partitions {
		kp := sourcePartition{p.Source, kafka.Partition{Topic: p.Topic, Partition: p.Partition}}
		seen[kp] = true
		h := p.High
		if w, ok := high[kp]; ok {
			h = w.High
		}
		l := PartitionLag{Source: p.Source, Topic: p.Topic, Partition: p.Partition, Committed: p.Next, High: h, Lag: max(0, h-p.Next)}
		total += l.Lag
		out = append(out, l)
	}
	// Partitions the broker has and the manifest does not yet (added
	// since): all of them is lag, from their low watermark.
	var fresh []sourcePartition
	for kp := range high {
		if !seen[kp] {
			fresh = append(fresh, kp)
		}
	}
	slices.SortFunc(fresh, func(a, b sourcePartition) int {
		if c := strings.Compare(a.source, b.source); c != 0 {
			return c
		}
		if a.Less(b.Partition) {
			return -1
		}
		return 1
	})
	for _, kp := range fresh {
		w := high[kp]
		l := PartitionLag{Source: kp.source, Topic: kp.Topic, Partition: kp.Partition.Partition, Committed: w.Low, High: w.High, Lag: max(0, w.High-w.Low)}
		total += l.Lag
		out = append(out, l)
	}
	return out, total
}

// kafkaStatus fills the per-partition lag of a status from the brokers'
// high watermarks now (after the pending listing asked for them).
func (s *Status) kafkaStatus(src store.Store, head *epoch.Head) {
	ks := sources.KafkaOf(src)
	if len(ks) == 0 {
		return
	}
	var ko *manifest.KafkaOffsets
	if head != nil && head.Manifest != nil {
		ko = head.Manifest.Source.Kafka
	}
	if ko == nil {
		ko = &manifest.KafkaOffsets{}
	}
	high := map[sourcePartition]kafka.Watermarks{}
	for _, k := range ks {
		for p, w := range k.Source.Watermarks() {
			high[sourcePartition{k.Name, p}] = w
		}
	}
	parts, total := lagOf(ko, high)
	s.KafkaPartitions, s.KafkaLag = parts, &total
}
