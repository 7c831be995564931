package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Range is the half-open offset range [From, To) of one partition.
type Range struct {
	Partition
	From, To int64
}

// String is "topic/partition[from,to)".
func (r Range) String() string { return fmt.Sprintf("%s[%d,%d)", r.Partition, r.From, r.To) }

// Len is the number of offsets in the range.
func (r Range) Len() int64 {
	if r.To <= r.From {
		return 0
	}
	return r.To - r.From
}

// Record is one fetched record.
type Record struct {
	Partition
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
}

// MissingOffsetsError says that offsets a range asked for are no longer in
// the log (retention or DeleteRecords removed them): [From, To) of the
// partition are gone, the log starts at LogStart.
type MissingOffsetsError struct {
	Partition
	From, To int64
	LogStart int64
}

func (e *MissingOffsetsError) Error() string {
	return fmt.Sprintf("kafka: topic %q partition %d: offsets %d to %d are no longer in the log (it starts at offset %d: retention or a record deletion removed them); "+
		"set on_missing_offsets: skip to continue from offset %d, counting them as skipped",
		e.Topic, e.Partition.Partition, e.From, e.To-1, e.LogStart, e.LogStart)
}

// Skipped is a missing range that FetchOptions.SkipMissing skipped.
type Skipped struct {
	Partition
	From, To int64 // the offsets skipped, [From, To)
}

// FetchOptions configure Fetch.
type FetchOptions struct {
	// SkipMissing skips offsets below a partition's log start instead of
	// failing with a *MissingOffsetsError; they are listed in
	// Fetched.Skipped.
	SkipMissing bool
	// Timeout bounds the whole fetch (default 2 minutes): a range not
	// complete by then is an error naming how far it got.
	Timeout time.Duration
	// MaxWait is how long the broker may hold a fetch waiting for data
	// (default 250ms).
	MaxWait time.Duration
}

// Fetched is the result of Fetch.
type Fetched struct {
	// Records are the data records of the ranges, by partition (sorted)
	// then offset.
	Records []Record
	// Skipped are the missing offsets skipped (SkipMissing).
	Skipped []Skipped
	// Bytes is the sum of the records' key and value sizes.
	Bytes int64
}

// SkippedCount is the number of offsets skipped.
func (f *Fetched) SkippedCount() int64 {
	var n int64
	for _, s := range f.Skipped {
		n += s.To - s.From
	}
	return n
}

// Fetch reads exactly the records of ranges: every data record whose
// offset is in [From, To) of its partition (package doc, contract 1 and
// 2). Ranges must name distinct partitions; empty ranges are ignored.
func (c *Client) Fetch(ctx context.Context, ranges []Range, opts FetchOptions) (*Fetched, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 250 * time.Millisecond
	}
	out := &Fetched{}
	want := map[Partition]Range{}
	var topics []string
	seenTopic := map[string]bool{}
	for _, r := range ranges {
		if r.Len() == 0 {
			continue
		}
		if r.From < 0 {
			return nil, fmt.Errorf("kafka fetch %s: negative offset", r)
		}
		if _, dup := want[r.Partition]; dup {
			return nil, fmt.Errorf("kafka fetch: partition %s named twice", r.Partition)
		}
		want[r.Partition] = r
		if !seenTopic[r.Topic] {
			seenTopic[r.Topic] = true
			topics = append(topics, r.Topic)
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	// Offsets below the log start are gone: fail or skip them before
	// fetching (the broker would answer OffsetOutOfRange).
	wms, err := c.Watermarks(ctx, topics...)
	if err != nil {
		return nil, err
	}
	for p, r := range want {
		w, ok := wms[p]
		if !ok {
			return nil, fmt.Errorf("kafka fetch %s: the partition does not exist", r)
		}
		if r.To > w.High {
			return nil, fmt.Errorf("kafka fetch %s: the partition ends at offset %d (high watermark): the range runs past it", r, w.High)
		}
		if r.From < w.Low {
			gone := Skipped{Partition: p, From: r.From, To: min(r.To, w.Low)}
			if !opts.SkipMissing {
				return nil, &MissingOffsetsError{Partition: p, From: gone.From, To: gone.To, LogStart: w.Low}
			}
			out.Skipped = append(out.Skipped, gone)
			r.From = gone.To
			if r.Len() == 0 {
				delete(want, p)
				continue
			}
			want[p] = r
		}
	}
	sortSkipped(out.Skipped)
	if len(want) == 0 {
		return out, nil
	}
	got, err := c.consume(ctx, want, opts)
	if err != nil {
		var miss *MissingOffsetsError
		if errors.As(err, &miss) && opts.SkipMissing {
			// Retention passed the range between the check and the
			// fetch: check again (bounded: the log start only grows).
			return c.Fetch(ctx, ranges, opts)
		}
		return nil, err
	}
	parts := make([]Partition, 0, len(got))
	for p := range got {
		parts = append(parts, p)
	}
	SortPartitions(parts)
	for _, p := range parts {
		for _, rec := range got[p] {
			out.Bytes += int64(len(rec.Key) + len(rec.Value))
		}
		out.Records = append(out.Records, got[p]...)
	}
	return out, nil
}

// consume reads the ranges of want with a direct (group-less) consumer.
func (c *Client) consume(ctx context.Context, want map[Partition]Range, opts FetchOptions) (map[Partition][]Record, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	start := map[string]map[int32]kgo.Offset{}
	for p, r := range want {
		if start[p.Topic] == nil {
			start[p.Topic] = map[int32]kgo.Offset{}
		}
		start[p.Topic][p.Partition] = kgo.NewOffset().At(r.From)
	}
	o := append(append([]kgo.Opt(nil), c.base...),
		kgo.ConsumePartitions(start),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(opts.MaxWait),
	)
	cl, err := kgo.NewClient(o...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	got := map[Partition][]Record{}
	next := map[Partition]int64{} // the offset after the last record seen
	for p, r := range want {
		next[p] = r.From
	}
	left := len(want)
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, c.incomplete(want, next, opts.Timeout, ctx.Err())
		}
		var ferr error
		fs.EachError(func(t string, part int32, err error) {
			if ferr != nil {
				return
			}
			p := Partition{t, part}
			r, ok := want[p]
			if !ok {
				return
			}
			if errors.Is(err, kerr.OffsetOutOfRange) {
				w, werr := c.Watermarks(ctx, t)
				if werr == nil && w[p].Low > next[p] {
					ferr = &MissingOffsetsError{Partition: p, From: next[p], To: min(r.To, w[p].Low), LogStart: w[p].Low}
					return
				}
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			ferr = c.brokersErr(fmt.Sprintf("fetch %s at offset %d", p, next[p]), err)
		})
		if ferr != nil {
			return nil, ferr
		}
		var done []Partition
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			p := Partition{fp.Topic, fp.FetchPartition.Partition}
			r, ok := want[p]
			if !ok || next[p] >= r.To {
				return
			}
			for _, rec := range fp.Records {
				if rec.Offset < next[p] {
					continue // a re-fetch of what was seen
				}
				next[p] = rec.Offset + 1
				if rec.Offset >= r.To {
					break
				}
				if rec.Attrs.IsControl() {
					continue
				}
				got[p] = append(got[p], Record{Partition: p, Offset: rec.Offset, Timestamp: rec.Timestamp,
					Key: rec.Key, Value: rec.Value})
			}
			if next[p] >= r.To {
				done = append(done, p)
			}
		})
		if len(done) > 0 {
			pause := map[string][]int32{}
			for _, p := range done {
				pause[p.Topic] = append(pause[p.Topic], p.Partition)
			}
			cl.PauseFetchPartitions(pause)
			left -= len(done)
		}
	}
	return got, nil
}

func (c *Client) incomplete(want map[Partition]Range, next map[Partition]int64, timeout time.Duration, err error) error {
	parts := make([]Partition, 0, len(want))
	for p := range want {
		if next[p] < want[p].To {
			parts = append(parts, p)
		}
	}
	SortPartitions(parts)
	if len(parts) == 0 {
		return err
	}
	p := parts[0]
	return fmt.Errorf("kafka fetch %s: read up to offset %d after %s (%d partitions incomplete): %w", want[p], next[p], timeout, len(parts), err)
}

func sortSkipped(s []Skipped) {
	sort.Slice(s, func(i, j int) bool { return s[i].Partition.Less(s[j].Partition) })
}
