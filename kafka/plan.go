package kafka

import (
	"hash/fnv"
	"sort"
)

// NextRanges is the decide step of a Kafka source: from the committed next
// offset of each partition (the offset after the last one an epoch
// consumed) and the partitions' watermarks, the ranges the next epoch
// reads. It is a pure function.
//
//   - A partition in wms but not in committed (new to the pipeline: its
//     first epoch, or a partition added to the topic since) starts at
//     start(p) (earliest: its low watermark; latest: its high watermark at
//     the run's start; a time: the offset for that time).
//   - Each range ends at the partition's high watermark in upTo (the
//     high-water marks a --once run saw at its start), or wms' when upTo
//     has no entry.
//   - max > 0 bounds the records of all ranges together; it is shared
//     fairly: in rounds, each partition with records left takes an equal
//     share of what is left (partitions in sorted order take the
//     remainder one by one), so a busy partition does not starve the
//     others and the result depends only on the inputs.
//
// A committed offset below the low watermark is kept (the fetch reports
// the missing offsets, package doc contract 2). Ranges come back sorted by
// partition, empty ones left out; next holds the start offset of every
// partition of wms (what the manifest records when the epoch commits, with
// the ranges' ends applied: Advance).
func NextRanges(committed map[Partition]int64, wms map[Partition]Watermarks, upTo map[Partition]int64,
	start func(Partition) int64, max int64) (ranges []Range, next map[Partition]int64) {
	parts := make([]Partition, 0, len(wms))
	for p := range wms {
		parts = append(parts, p)
	}
	SortPartitions(parts)
	next = make(map[Partition]int64, len(parts))
	var all []Range
	for _, p := range parts {
		from, ok := committed[p]
		if !ok {
			from = start(p)
		}
		next[p] = from
		end := wms[p].High
		if u, ok := upTo[p]; ok && u < end {
			end = u
		}
		if end > from {
			all = append(all, Range{Partition: p, From: from, To: end})
		}
	}
	// Committed partitions no longer listed (a deleted topic) keep their
	// offsets, so a manifest never forgets where a partition was.
	for p, o := range committed {
		if _, ok := next[p]; !ok {
			next[p] = o
		}
	}
	if max <= 0 {
		return all, next
	}
	take := make([]int64, len(all))
	left := max
	for left > 0 {
		open := 0
		for i, r := range all {
			if take[i] < r.Len() {
				open++
			}
		}
		if open == 0 {
			break
		}
		share := left / int64(open)
		for i, r := range all {
			if take[i] >= r.Len() || left == 0 {
				continue
			}
			n := share
			if n == 0 {
				n = 1
			}
			if rest := r.Len() - take[i]; n > rest {
				n = rest
			}
			take[i] += n
			left -= n
		}
	}
	for i, r := range all {
		if take[i] > 0 {
			r.To = r.From + take[i]
			ranges = append(ranges, r)
		}
	}
	return ranges, next
}

// Advance returns next with every range's end applied: the offsets the
// manifest of the epoch that read ranges records.
func Advance(next map[Partition]int64, ranges []Range) map[Partition]int64 {
	out := make(map[Partition]int64, len(next))
	for p, o := range next {
		out[p] = o
	}
	for _, r := range ranges {
		if r.To > out[r.Partition] {
			out[r.Partition] = r.To
		}
	}
	return out
}

// SubtaskOf assigns partition p to one of n subtasks: fnv1a32(topic) plus
// the partition number, mod n. Deterministic and independent of the other
// partitions, so adding a partition moves no other one; rescaling moves
// partitions, which is safe because their offsets are recorded per
// partition, not per subtask.
func SubtaskOf(p Partition, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(p.Topic))
	return int((uint64(h.Sum32()) + uint64(uint32(p.Partition))) % uint64(n))
}

// Assign groups parts by SubtaskOf, each group sorted.
func Assign(parts []Partition, n int) [][]Partition {
	if n < 1 {
		n = 1
	}
	out := make([][]Partition, n)
	for _, p := range parts {
		s := SubtaskOf(p, n)
		out[s] = append(out[s], p)
	}
	for _, g := range out {
		sort.Slice(g, func(i, j int) bool { return g[i].Less(g[j]) })
	}
	return out
}
