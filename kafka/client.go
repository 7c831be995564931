package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Partition names one partition of a topic.
type Partition struct {
	Topic     string
	Partition int32
}

// String is "topic/partition".
func (p Partition) String() string { return fmt.Sprintf("%s/%d", p.Topic, p.Partition) }

// Less orders partitions by topic, then number.
func (p Partition) Less(q Partition) bool {
	if p.Topic != q.Topic {
		return p.Topic < q.Topic
	}
	return p.Partition < q.Partition
}

// SortPartitions sorts ps by topic, then number.
func SortPartitions(ps []Partition) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Less(ps[j]) })
}

// Watermarks are a partition's low watermark (log start offset: the first
// offset the log still holds) and high watermark (the offset the next
// record will get). The log holds offsets [Low, High).
type Watermarks struct {
	Low, High int64
}

// Config says how to reach the brokers.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Auth is the TLS and SASL set-up (LoadAuth).
	Auth Auth
	// ClientID is sent to the brokers (default "floe").
	ClientID string
	// DialTimeout bounds one connection attempt (default 10s).
	DialTimeout time.Duration
	// RequestTimeout bounds each admin call (Partitions, Watermarks,
	// OffsetsForTime; default 30s).
	RequestTimeout time.Duration
}

// Client talks to one Kafka cluster. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base []kgo.Opt
	cl   *kgo.Client
	adm  *kadm.Client
}

// Dial returns a client of the cluster cfg names; it connects lazily, on
// the first request.
func Dial(cfg Config) (*Client, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers")
	}
	for _, b := range cfg.Brokers {
		if strings.TrimSpace(b) == "" || !strings.Contains(b, ":") {
			return nil, fmt.Errorf("kafka: broker %q: want host:port", b)
		}
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "floe"
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	auth, err := cfg.Auth.opts()
	if err != nil {
		return nil, err
	}
	base := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DialTimeout(cfg.DialTimeout),
		kgo.MetadataMinAge(100 * time.Millisecond),
	}, auth...)
	cl, err := kgo.NewClient(base...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return &Client{cfg: cfg, base: base, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close closes the client's connections.
func (c *Client) Close() { c.cl.Close() }

func (c *Client) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.RequestTimeout)
}

// brokersErr wraps err with where it happened; it never names credentials
// (the Auth is not part of the message).
func (c *Client) brokersErr(what string, err error) error {
	return fmt.Errorf("kafka %s (brokers %s): %w", what, strings.Join(c.cfg.Brokers, ","), err)
}

// Partitions lists the partitions of topics, sorted. A topic that does not
// exist is an error naming it.
func (c *Client) Partitions(ctx context.Context, topics ...string) ([]Partition, error) {
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	tds, err := c.adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, c.brokersErr("list partitions", err)
	}
	var out []Partition
	for _, t := range topics {
		td, ok := tds[t]
		if !ok {
			return nil, fmt.Errorf("kafka: topic %q does not exist", t)
		}
		if td.Err != nil {
			if errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("kafka: topic %q does not exist", t)
			}
			return nil, c.brokersErr("topic "+t, td.Err)
		}
		for _, p := range td.Partitions.Numbers() {
			out = append(out, Partition{Topic: t, Partition: p})
		}
	}
	SortPartitions(out)
	return out, nil
}

// Watermarks returns the low and high watermark of every partition of
// topics.
func (c *Client) Watermarks(ctx context.Context, topics ...string) (map[Partition]Watermarks, error) {
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	start, err := c.adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, c.brokersErr("list start offsets", err)
	}
	end, err := c.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, c.brokersErr("list end offsets", err)
	}
	out := map[Partition]Watermarks{}
	var ferr error
	start.Each(func(o kadm.ListedOffset) {
		if o.Partition < 0 {
			ferr = fmt.Errorf("kafka: topic %q does not exist", o.Topic)
			return
		}
		if o.Err != nil {
			ferr = c.brokersErr(fmt.Sprintf("start offset of %s/%d", o.Topic, o.Partition), o.Err)
			return
		}
		out[Partition{o.Topic, o.Partition}] = Watermarks{Low: o.Offset}
	})
	end.Each(func(o kadm.ListedOffset) {
		if o.Partition < 0 {
			ferr = fmt.Errorf("kafka: topic %q does not exist", o.Topic)
			return
		}
		if o.Err != nil {
			ferr = c.brokersErr(fmt.Sprintf("end offset of %s/%d", o.Topic, o.Partition), o.Err)
			return
		}
		p := Partition{o.Topic, o.Partition}
		w := out[p]
		w.High = o.Offset
		out[p] = w
	})
	if ferr != nil {
		return nil, ferr
	}
	for _, t := range topics {
		found := false
		for p := range out {
			if p.Topic == t {
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("kafka: topic %q does not exist", t)
		}
	}
	return out, nil
}

// OffsetsForTime returns, per partition of topics, the first offset whose
// record timestamp is at or after t (the broker's ListOffsets by
// timestamp); a partition with no such record gets its high watermark.
func (c *Client) OffsetsForTime(ctx context.Context, t time.Time, topics ...string) (map[Partition]int64, error) {
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	ls, err := c.adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topics...)
	if err != nil {
		return nil, c.brokersErr("list offsets by time", err)
	}
	out := map[Partition]int64{}
	var ferr error
	ls.Each(func(o kadm.ListedOffset) {
		if o.Partition < 0 {
			ferr = fmt.Errorf("kafka: topic %q does not exist", o.Topic)
			return
		}
		if o.Err != nil {
			ferr = c.brokersErr(fmt.Sprintf("offset by time of %s/%d", o.Topic, o.Partition), o.Err)
			return
		}
		out[Partition{o.Topic, o.Partition}] = o.Offset
	})
	return out, ferr
}
