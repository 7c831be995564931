// Package kafkatest gives tests a Kafka-protocol broker: franz-go's kfake,
// an in-process broker on a loopback port, or, when FLOE_KAFKA_TEST_BROKERS
// is set (host:port,host:port), a real Kafka or Redpanda cluster reached
// with the authentication of the FLOE_KAFKA_* environment (kafka.LoadAuth).
// Against a real cluster every test creates topics of its own, with a
// unique name, and deletes them at the end.
package kafkatest

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/kafka"
)

// EnvBrokers names a real cluster to test against instead of kfake.
const EnvBrokers = "FLOE_KAFKA_TEST_BROKERS"

// Broker is a cluster a test produces to.
type Broker struct {
	t       testing.TB
	brokers []string
	fake    *kfake.Cluster
	auth    kafka.Auth
	cl      *kgo.Client
	adm     *kadm.Client
	topics  []string
	real    bool
	dataDir string // a kfake broker that can restart (StartRestartable)
}

var seq atomic.Int64

// Start returns a broker for t, closed when t ends.
func Start(t testing.TB) *Broker {
	t.Helper()
	b := &Broker{t: t}
	if env := os.Getenv(EnvBrokers); env != "" {
		b.real = true
		for _, s := range strings.Split(env, ",") {
			if s = strings.TrimSpace(s); s != "" {
				b.brokers = append(b.brokers, s)
			}
		}
		a, err := kafka.LoadAuth("", nil)
		if err != nil {
			t.Fatal(err)
		}
		b.auth = a
	} else {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatalf("kfake: %v", err)
		}
		b.fake = c
		b.brokers = c.ListenAddrs()
	}
	b.connect()
	t.Cleanup(b.Close)
	return b
}

func (b *Broker) connect() {
	c, err := kafka.Dial(kafka.Config{Brokers: b.brokers, Auth: b.auth})
	if err != nil {
		b.t.Fatal(err)
	}
	c.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(b.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.MetadataMinAge(50 * time.Millisecond)}
	opts = append(opts, kafka.ClientOpts(b.auth)...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.cl, b.adm = cl, kadm.NewClient(cl)
}

// StartRestartable starts a kfake broker that keeps its log in a
// directory, so that Restart stops it and starts it again on the same port
// with the same records. With EnvBrokers set the test is skipped: a real
// cluster is not restarted by a test.
func StartRestartable(t testing.TB) *Broker {
	t.Helper()
	if os.Getenv(EnvBrokers) != "" {
		t.Skip("restarting the broker needs kfake; " + EnvBrokers + " names a real cluster")
	}
	dir := t.TempDir()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(dir), kfake.SyncWrites())
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	b := &Broker{t: t, fake: c, brokers: c.ListenAddrs(), dataDir: dir}
	b.connect()
	t.Cleanup(b.Close)
	return b
}

// Restart stops the broker and, after down, starts it again on the same
// address with the same log (StartRestartable only). Clients see their
// connections drop and reconnect.
func (b *Broker) Restart(down time.Duration) {
	b.t.Helper()
	if b.dataDir == "" {
		b.t.Fatal("Restart needs a broker from StartRestartable")
	}
	_, port, err := net.SplitHostPort(b.brokers[0])
	if err != nil {
		b.t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	b.fake.Close()
	time.Sleep(down)
	var c *kfake.Cluster
	for i := 0; ; i++ {
		c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(b.dataDir), kfake.SyncWrites(), kfake.Ports(n))
		if err == nil || i == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond) // the port is released
	}
	if err != nil {
		b.t.Fatalf("kfake restart on port %d: %v", n, err)
	}
	b.fake = c
}

// Real reports whether the broker is a real cluster (EnvBrokers).
func (b *Broker) Real() bool { return b.real }

// Brokers are the seed addresses.
func (b *Broker) Brokers() []string { return b.brokers }

// Auth is the authentication to use (none for kfake).
func (b *Broker) Auth() kafka.Auth { return b.auth }

// Config is a kafka.Config for the broker.
func (b *Broker) Config() kafka.Config { return kafka.Config{Brokers: b.brokers, Auth: b.auth} }

// Close deletes the topics a test created on a real cluster and closes.
func (b *Broker) Close() {
	if b.cl == nil {
		return
	}
	if b.real && len(b.topics) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, _ = b.adm.DeleteTopics(ctx, b.topics...)
		cancel()
	}
	b.cl.Close()
	b.cl = nil
	if b.fake != nil {
		b.fake.Close()
	}
}

// Topic creates a topic with parts partitions and returns its name: name
// itself on kfake, name with a unique suffix on a real cluster.
func (b *Broker) Topic(name string, parts int32) string {
	b.t.Helper()
	if b.real {
		name = fmt.Sprintf("%s-%d-%d", name, time.Now().UnixNano(), seq.Add(1))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := b.adm.CreateTopic(ctx, parts, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.t.Fatalf("create topic %s: %v", name, err)
	}
	b.topics = append(b.topics, name)
	return name
}

// AddPartitions adds n partitions to topic.
func (b *Broker) AddPartitions(topic string, n int) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := b.adm.CreatePartitions(ctx, n, topic)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		b.t.Fatalf("add %d partitions to %s: %v", n, topic, err)
	}
}

// Msg is one record to produce.
type Msg struct {
	Partition int32
	Key       string // empty: a null key
	Value     string
	Time      time.Time // zero: the broker's clock
}

// Produce writes msgs synchronously, in order, and returns their offsets.
func (b *Broker) Produce(topic string, msgs ...Msg) []int64 {
	b.t.Helper()
	offs, err := b.TryProduce(topic, msgs...)
	if err != nil {
		b.t.Fatal(err)
	}
	return offs
}

// TryProduce is Produce returning the error (for producers running in
// a goroutine).
func (b *Broker) TryProduce(topic string, msgs ...Msg) ([]int64, error) {
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		r := &kgo.Record{Topic: topic, Partition: m.Partition, Value: []byte(m.Value), Timestamp: m.Time}
		if m.Key != "" {
			r.Key = []byte(m.Key)
		}
		recs[i] = r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	todo := recs
	for len(todo) > 0 {
		res := b.cl.ProduceSync(ctx, todo...)
		var again []*kgo.Record
		for _, r := range res {
			if r.Err == nil {
				continue
			}
			// Partitions just added: the producer's metadata catches
			// up; only the records it refused are sent again.
			if strings.Contains(r.Err.Error(), "invalid record partitioning") && ctx.Err() == nil {
				again = append(again, r.Record)
				continue
			}
			return nil, fmt.Errorf("produce to %s: %w", topic, r.Err)
		}
		if len(again) > 0 {
			b.cl.ForceMetadataRefresh()
			time.Sleep(50 * time.Millisecond)
		}
		todo = again
	}
	offs := make([]int64, len(recs))
	for i, r := range recs {
		offs[i] = r.Offset
	}
	return offs, nil
}

// DeleteRecords removes the offsets below before from a partition (what
// retention does).
func (b *Broker) DeleteRecords(topic string, partition int32, before int64) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: partition, At: before, LeaderEpoch: -1})
	rs, err := b.adm.DeleteRecords(ctx, os)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		b.t.Fatalf("delete records of %s/%d below %d: %v", topic, partition, before, err)
	}
}

// StartSASL starts a kfake broker that requires SASL mech with one user
// and a topic "seeded" (one partition); it returns the addresses.
func StartSASL(t testing.TB, mech, user, pass string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech, user, pass), kfake.SeedTopics(1, "seeded"))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}
