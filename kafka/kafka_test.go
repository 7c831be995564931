package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/kafka"
	"github.com/floe-dev/floe/kafka/kafkatest"
)

func dial(t *testing.T, b *kafkatest.Broker) *kafka.Client {
	t.Helper()
	c, err := kafka.Dial(b.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func msgs(p int32, from, n int) []kafkatest.Msg {
	out := make([]kafkatest.Msg, n)
	for i := range out {
		out[i] = kafkatest.Msg{Partition: p, Key: fmt.Sprintf("k%d", from+i), Value: fmt.Sprintf(`{"n":%d,"p":%d}`, from+i, p)}
	}
	return out
}

func offsets(recs []kafka.Record) map[int32][]int64 {
	out := map[int32][]int64{}
	for _, r := range recs {
		out[r.Partition.Partition] = append(out[r.Partition.Partition], r.Offset)
	}
	return out
}

func seqOf(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// TestFetchExactRanges: a fetch returns exactly the records of [From, To)
// per partition, whatever else the partition holds after To.
func TestFetchExactRanges(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic("events", 3)
	for p := int32(0); p < 3; p++ {
		b.Produce(topic, msgs(p, 0, 20+int(p)*5)...)
	}
	c := dial(t, b)
	ctx := context.Background()
	parts, err := c.Partitions(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 || parts[0].Partition != 0 || parts[2].Partition != 2 {
		t.Fatalf("partitions = %v", parts)
	}
	wms, err := c.Watermarks(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		if w := wms[kafka.Partition{Topic: topic, Partition: p}]; w.Low != 0 || w.High != int64(20+p*5) {
			t.Fatalf("partition %d watermarks = %+v", p, w)
		}
	}
	ranges := []kafka.Range{
		{Partition: kafka.Partition{Topic: topic, Partition: 0}, From: 3, To: 11},
		{Partition: kafka.Partition{Topic: topic, Partition: 1}, From: 0, To: 25},
		{Partition: kafka.Partition{Topic: topic, Partition: 2}, From: 29, To: 30},
	}
	f, err := c.Fetch(ctx, ranges, kafka.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := offsets(f.Records)
	want := map[int32][]int64{0: seqOf(3, 11), 1: seqOf(0, 25), 2: {29}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("offsets = %v, want %v", got, want)
	}
	if r := f.Records[0]; string(r.Value) != `{"n":3,"p":0}` || string(r.Key) != "k3" {
		t.Fatalf("first record = %q %q", r.Key, r.Value)
	}
	// Records come sorted by partition, then offset.
	for i := 1; i < len(f.Records); i++ {
		a, z := f.Records[i-1], f.Records[i]
		if z.Partition.Less(a.Partition) || (a.Partition == z.Partition && z.Offset <= a.Offset) {
			t.Fatalf("records out of order at %d: %v@%d then %v@%d", i, a.Partition, a.Offset, z.Partition, z.Offset)
		}
	}
	// A range past the high watermark is refused, not waited for.
	_, err = c.Fetch(ctx, []kafka.Range{{Partition: kafka.Partition{Topic: topic, Partition: 0}, From: 0, To: 21}}, kafka.FetchOptions{})
	if err == nil || !strings.Contains(err.Error(), "high watermark") {
		t.Fatalf("fetch past the end: %v", err)
	}
	if _, err := c.Partitions(ctx, "no-such-topic"); err == nil || !strings.Contains(err.Error(), `"no-such-topic" does not exist`) {
		t.Fatalf("missing topic: %v", err)
	}
}

// TestPartitionsAdded: partitions added to a topic are listed and fetched;
// NextRanges starts them at the start offset while the old ones continue.
func TestPartitionsAdded(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic("grow", 2)
	b.Produce(topic, append(msgs(0, 0, 5), msgs(1, 0, 5)...)...)
	c := dial(t, b)
	ctx := context.Background()
	wms, err := c.Watermarks(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	earliest := func(p kafka.Partition) int64 { return wms[p].Low }
	rs, next := kafka.NextRanges(nil, wms, nil, earliest, 0)
	if len(rs) != 2 {
		t.Fatalf("ranges = %v", rs)
	}
	committed := kafka.Advance(next, rs)
	b.AddPartitions(topic, 2)
	b.Produce(topic, append(msgs(2, 0, 3), msgs(3, 0, 4)...)...)
	b.Produce(topic, msgs(0, 5, 2)...)
	var parts []kafka.Partition
	deadline := time.Now().Add(10 * time.Second)
	for len(parts) < 4 && time.Now().Before(deadline) {
		if parts, err = c.Partitions(ctx, topic); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(parts) != 4 {
		t.Fatalf("partitions after adding 2: %v", parts)
	}
	if wms, err = c.Watermarks(ctx, topic); err != nil {
		t.Fatal(err)
	}
	rs, _ = kafka.NextRanges(committed, wms, nil, earliest, 0)
	want := []string{topic + "/0[5,7)", topic + "/2[0,3)", topic + "/3[0,4)"}
	var gotS []string
	for _, r := range rs {
		gotS = append(gotS, r.String())
	}
	if !reflect.DeepEqual(gotS, want) {
		t.Fatalf("ranges after adding partitions = %v, want %v", gotS, want)
	}
	f, err := c.Fetch(ctx, rs, kafka.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := offsets(f.Records); !reflect.DeepEqual(got, map[int32][]int64{0: {5, 6}, 2: seqOf(0, 3), 3: seqOf(0, 4)}) {
		t.Fatalf("offsets = %v", got)
	}
}

// TestOffsetsForTime: start_from by time finds the first offset at or
// after the time in every partition, and the high watermark when none.
func TestOffsetsForTime(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic("timed", 2)
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	var ms []kafkatest.Msg
	for i := 0; i < 10; i++ {
		ms = append(ms, kafkatest.Msg{Partition: 0, Value: fmt.Sprintf(`{"i":%d}`, i), Time: t0.Add(time.Duration(i) * time.Minute)})
	}
	for i := 0; i < 4; i++ {
		ms = append(ms, kafkatest.Msg{Partition: 1, Value: fmt.Sprintf(`{"i":%d}`, i), Time: t0.Add(time.Duration(i) * time.Minute)})
	}
	b.Produce(topic, ms...)
	c := dial(t, b)
	got, err := c.OffsetsForTime(context.Background(), t0.Add(5*time.Minute-time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := kafka.Partition{Topic: topic, Partition: 0}, kafka.Partition{Topic: topic, Partition: 1}
	if got[p0] != 5 || got[p1] != 4 {
		t.Fatalf("offsets for time = %v, want p0 5, p1 4 (its end)", got)
	}
	f, err := c.Fetch(context.Background(), []kafka.Range{{Partition: p0, From: got[p0], To: 10}}, kafka.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Records {
		if r.Timestamp.Before(t0.Add(5 * time.Minute)) {
			t.Fatalf("record at offset %d has time %v, before the start", r.Offset, r.Timestamp)
		}
	}
	if len(f.Records) != 5 || !f.Records[0].Timestamp.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("records from the time: %d, first at %v", len(f.Records), f.Records[0].Timestamp)
	}
}

// TestMissingOffsets: a range below the log start (deleted records) is a
// typed error naming the partition and the offsets; with SkipMissing the
// rest is read and the gap counted.
func TestMissingOffsets(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic("retained", 2)
	b.Produce(topic, append(msgs(0, 0, 10), msgs(1, 0, 10)...)...)
	b.DeleteRecords(topic, 1, 6)
	c := dial(t, b)
	ctx := context.Background()
	p0, p1 := kafka.Partition{Topic: topic, Partition: 0}, kafka.Partition{Topic: topic, Partition: 1}
	ranges := []kafka.Range{{Partition: p0, From: 2, To: 10}, {Partition: p1, From: 2, To: 10}}
	_, err := c.Fetch(ctx, ranges, kafka.FetchOptions{})
	var miss *kafka.MissingOffsetsError
	if !errors.As(err, &miss) {
		t.Fatalf("fetch of deleted offsets: %v, want a MissingOffsetsError", err)
	}
	if miss.Partition != p1 || miss.From != 2 || miss.To != 6 || miss.LogStart != 6 {
		t.Fatalf("missing = %+v", miss)
	}
	for _, s := range []string{`topic "` + topic + `" partition 1`, "offsets 2 to 5", "on_missing_offsets: skip"} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not say %q", err, s)
		}
	}
	f, err := c.Fetch(ctx, ranges, kafka.FetchOptions{SkipMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := offsets(f.Records); !reflect.DeepEqual(got, map[int32][]int64{0: seqOf(2, 10), 1: seqOf(6, 10)}) {
		t.Fatalf("offsets with skip = %v", got)
	}
	if f.SkippedCount() != 4 || len(f.Skipped) != 1 || f.Skipped[0].Partition != p1 {
		t.Fatalf("skipped = %+v", f.Skipped)
	}
	// A range wholly deleted.
	f, err = c.Fetch(ctx, []kafka.Range{{Partition: p1, From: 0, To: 4}}, kafka.FetchOptions{SkipMissing: true})
	if err != nil || len(f.Records) != 0 || f.SkippedCount() != 4 {
		t.Fatalf("wholly deleted range: %v, %d records, %d skipped", err, len(f.Records), f.SkippedCount())
	}
}

// TestDecodeRecords: JSON and CSV values decode into the schema with the
// metadata columns; bad records are rejects naming partition and offset.
func TestDecodeRecords(t *testing.T) {
	schema, err := formats.SchemaFromFields([]formats.Field{{Name: "n", Type: "int64"}, {Name: "ts", Type: "timestamp"}})
	if err != nil {
		t.Fatal(err)
	}
	p := kafka.Partition{Topic: "t", Partition: 3}
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	recs := []kafka.Record{
		{Partition: p, Offset: 10, Timestamp: at, Key: []byte("a"), Value: []byte(`{"n":1,"ts":"2026-05-01T00:00:01Z"}`)},
		{Partition: p, Offset: 11, Timestamp: at, Value: []byte(`{"n":"x","ts":"2026-05-01T00:00:01Z"}`)},
		{Partition: p, Offset: 12, Timestamp: at.Add(time.Second), Key: []byte("c"), Value: []byte("{\"n\":3,\n \"ts\":\"2026-05-01T00:00:03Z\"}")},
		{Partition: p, Offset: 13, Timestamp: at, Value: nil},
		{Partition: p, Offset: 14, Timestamp: at, Value: []byte(`not json`)},
		{Partition: p, Offset: 15, Timestamp: at, Value: []byte(`{"n":5}`)}, // no event time
		{Partition: p, Offset: 16, Timestamp: at, Value: []byte(`{"n":6,"ts":"2026-05-01T00:00:06Z"}`)},
	}
	cols := kafka.Columns{Partition: "kafka_partition", Offset: "kafka_offset", Timestamp: "kafka_timestamp", Key: "kafka_key"}
	d, err := kafka.Decode(recs, kafka.DecodeOptions{Format: "jsonl", Schema: schema, EventTime: "ts", Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	var gotRej []string
	for _, r := range d.Rejects {
		gotRej = append(gotRej, fmt.Sprintf("%s@%d", r.Partition, r.Offset))
		if r.Reason == "" {
			t.Fatalf("reject at %d has no reason", r.Offset)
		}
	}
	if want := []string{"t/3@11", "t/3@13", "t/3@14", "t/3@15"}; !reflect.DeepEqual(gotRej, want) {
		t.Fatalf("rejects = %v, want %v", gotRej, want)
	}
	if d.Rows != 3 || len(d.Batches) != 1 {
		t.Fatalf("rows = %d in %d batches", d.Rows, len(d.Batches))
	}
	b := d.Batches[0]
	if names := fmt.Sprint(b.Schema().Fields()); !strings.Contains(names, "kafka_partition") || b.NumCols() != 6 {
		t.Fatalf("schema = %v", b.Schema())
	}
	n := b.Column(0).(*array.Int64)
	off := b.Column(3).(*array.Int64)
	part := b.Column(2).(*array.Int32)
	key := b.Column(5).(*array.String)
	ts := b.Column(4).(*array.Timestamp)
	for i, want := range []struct{ n, off int64 }{{1, 10}, {3, 12}, {6, 16}} {
		if n.Value(i) != want.n || off.Value(i) != want.off || part.Value(i) != 3 {
			t.Fatalf("row %d = n %d offset %d partition %d, want %+v", i, n.Value(i), off.Value(i), part.Value(i), want)
		}
	}
	if key.Value(0) != "a" || !key.IsNull(2) || key.Value(1) != "c" {
		t.Fatalf("keys = %v", key)
	}
	if ts.Value(1) != 0 && ts.Value(1).ToTime(0).IsZero() {
		t.Fatalf("timestamp = %v", ts)
	}
	if got := time.UnixMicro(int64(ts.Value(1))).UTC(); !got.Equal(at.Add(time.Second)) {
		t.Fatalf("kafka_timestamp of offset 12 = %v", got)
	}

	// CSV: one row a record, fields in schema order.
	csvRecs := []kafka.Record{
		{Partition: p, Offset: 0, Value: []byte("1,2026-05-01T00:00:01Z")},
		{Partition: p, Offset: 1, Value: []byte("oops,2026-05-01T00:00:01Z")},
		{Partition: p, Offset: 2, Value: []byte("3,2026-05-01T00:00:03Z\n4,2026-05-01T00:00:04Z")},
		{Partition: p, Offset: 3, Value: []byte("5,2026-05-01T00:00:05Z")},
	}
	d2, err := kafka.Decode(csvRecs, kafka.DecodeOptions{Format: "csv", Schema: schema, EventTime: "ts", Columns: kafka.Columns{Offset: "o"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Release()
	if d2.Rows != 2 || len(d2.Rejects) != 2 || d2.Rejects[0].Offset != 1 || d2.Rejects[1].Offset != 2 {
		t.Fatalf("csv: rows %d rejects %+v", d2.Rows, d2.Rejects)
	}
	if o := d2.Batches[0].Column(2).(*array.Int64); o.Value(0) != 0 || o.Value(1) != 3 {
		t.Fatalf("csv offsets = %v", o)
	}
	// A metadata column named like a value field is refused.
	if _, err := kafka.Decode(recs, kafka.DecodeOptions{Format: "jsonl", Schema: schema, Columns: kafka.Columns{Offset: "n"}}); err == nil || !strings.Contains(err.Error(), `"n"`) {
		t.Fatalf("clashing column: %v", err)
	}
}

// TestFetchAndDecodeBadRecords: produced bad records come back as rejects
// with their real offsets.
func TestFetchAndDecodeBadRecords(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic("bad", 1)
	b.Produce(topic, kafkatest.Msg{Value: `{"n":1}`}, kafkatest.Msg{Value: `{"n":`}, kafkatest.Msg{Value: `{"n":3}`})
	c := dial(t, b)
	p := kafka.Partition{Topic: topic}
	f, err := c.Fetch(context.Background(), []kafka.Range{{Partition: p, From: 0, To: 3}}, kafka.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := formats.SchemaFromFields([]formats.Field{{Name: "n", Type: "int64"}})
	d, err := kafka.Decode(f.Records, kafka.DecodeOptions{Format: "jsonl", Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	if d.Rows != 2 || len(d.Rejects) != 1 || d.Rejects[0].Offset != 1 || d.Rejects[0].Topic != topic {
		t.Fatalf("rows %d rejects %+v", d.Rows, d.Rejects)
	}
}

func TestNextRangesShareAndLimit(t *testing.T) {
	a, z := kafka.Partition{Topic: "t", Partition: 0}, kafka.Partition{Topic: "t", Partition: 1}
	c := kafka.Partition{Topic: "t", Partition: 2}
	wms := map[kafka.Partition]kafka.Watermarks{a: {0, 100}, z: {0, 3}, c: {50, 60}}
	start := func(p kafka.Partition) int64 { return wms[p].Low }
	rs, next := kafka.NextRanges(map[kafka.Partition]int64{a: 10}, wms, nil, start, 20)
	got := fmt.Sprint(rs)
	// 20 shared by 3: 6 each (z has only 3), then the 5 left: a 3, c 2.
	if want := "[t/0[10,19) t/1[0,3) t/2[50,58)]"; got != want {
		t.Fatalf("ranges = %s, want %s", got, want)
	}
	var total int64
	for _, r := range rs {
		total += r.Len()
	}
	if total != 20 {
		t.Fatalf("total %d, want the limit 20", total)
	}
	if next[a] != 10 || next[z] != 0 || next[c] != 50 {
		t.Fatalf("next = %v", next)
	}
	adv := kafka.Advance(next, rs)
	if adv[a] != 19 || adv[z] != 3 || adv[c] != 58 {
		t.Fatalf("advanced = %v", adv)
	}
	// upTo bounds a --once run at the high-water marks it saw at start.
	rs, _ = kafka.NextRanges(adv, map[kafka.Partition]kafka.Watermarks{a: {0, 200}, z: {0, 3}, c: {50, 60}},
		map[kafka.Partition]int64{a: 100, c: 60}, start, 0)
	if got := fmt.Sprint(rs); got != "[t/0[19,100) t/2[58,60)]" {
		t.Fatalf("bounded ranges = %s", got)
	}
	// A committed partition that is no longer listed keeps its offset.
	_, next = kafka.NextRanges(adv, map[kafka.Partition]kafka.Watermarks{a: {0, 100}}, nil, start, 0)
	if next[z] != 3 || next[c] != 58 {
		t.Fatalf("forgotten offsets: %v", next)
	}
}

func TestAssignDeterministic(t *testing.T) {
	var parts []kafka.Partition
	for i := int32(0); i < 16; i++ {
		parts = append(parts, kafka.Partition{Topic: "orders", Partition: i})
	}
	g := kafka.Assign(parts, 4)
	n := 0
	for s, ps := range g {
		for _, p := range ps {
			if kafka.SubtaskOf(p, 4) != s {
				t.Fatalf("%v in group %d", p, s)
			}
			n++
		}
		if len(ps) != 4 {
			t.Fatalf("group %d has %d partitions, want 4 (consecutive partitions spread)", s, len(ps))
		}
	}
	if n != 16 || !reflect.DeepEqual(g, kafka.Assign(parts, 4)) {
		t.Fatal("assignment not a deterministic partition of the input")
	}
}

func TestAuthFromEnvAndFile(t *testing.T) {
	env := map[string]string{kafka.EnvSASLMechanism: "scram-sha-512", kafka.EnvSASLUsername: "u", kafka.EnvSASLPassword: "s3cret-pw"}
	a, err := kafka.LoadAuth("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if a.Mechanism != kafka.MechSCRAMSHA512 || a.Username != "u" {
		t.Fatalf("auth = %v", a)
	}
	for _, s := range []string{a.String(), fmt.Sprintf("%v %+v %#v", a, a, a)} {
		if strings.Contains(s, "s3cret-pw") {
			t.Fatalf("the password is printed: %s", s)
		}
	}
	file := filepath.Join(t.TempDir(), "kafka.env")
	if err := os.WriteFile(file, []byte("# creds\nFLOE_KAFKA_SASL_MECHANISM=PLAIN\nFLOE_KAFKA_SASL_USERNAME=\"app\"\nFLOE_KAFKA_SASL_PASSWORD=pw-in-file\nFLOE_KAFKA_TLS=true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err = kafka.LoadAuth(file, func(string) string { t.Fatal("the environment is read although a file is named"); return "" })
	if err != nil {
		t.Fatal(err)
	}
	if a.Mechanism != kafka.MechPlain || a.Username != "app" || !a.TLS {
		t.Fatalf("auth from file = %v", a)
	}
	bad := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{kafka.EnvSASLMechanism: "GSSAPI", kafka.EnvSASLUsername: "u", kafka.EnvSASLPassword: "p"}, "unknown mechanism"},
		{map[string]string{kafka.EnvSASLMechanism: "PLAIN", kafka.EnvSASLUsername: "u"}, kafka.EnvSASLPassword},
		{map[string]string{kafka.EnvSASLPassword: "p"}, kafka.EnvSASLMechanism},
		{map[string]string{kafka.EnvTLS: "yes please"}, kafka.EnvTLS},
		{map[string]string{kafka.EnvTLSCertFile: "c.pem"}, kafka.EnvTLSKeyFile},
	}
	for _, c := range bad {
		_, err := kafka.LoadAuth("", func(k string) string { return c.env[k] })
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "p\"") {
			t.Fatalf("%v: error %v, want one naming %s", c.env, err, c.want)
		}
	}
	if err := os.WriteFile(file, []byte("FLOE_KAFKA_PASSWROD=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kafka.LoadAuth(file, nil); err == nil || !strings.Contains(err.Error(), ":1: unknown setting") {
		t.Fatalf("typo in file: %v", err)
	}
}

// TestSASLAgainstBroker: SCRAM and PLAIN against kfake with SASL on; a
// wrong password fails without printing it.
func TestSASLAgainstBroker(t *testing.T) {
	if os.Getenv(kafkatest.EnvBrokers) != "" {
		t.Skip("SASL is tested against kfake only (a real cluster's users are its own)")
	}
	for _, mech := range []string{kafka.MechPlain, kafka.MechSCRAMSHA256, kafka.MechSCRAMSHA512} {
		t.Run(mech, func(t *testing.T) {
			addrs := kafkatest.StartSASL(t, mech, "admin", "adminpw")
			ctx := context.Background()
			good := kafka.Auth{Mechanism: mech, Username: "admin"}.WithPassword("adminpw")
			c, err := kafka.Dial(kafka.Config{Brokers: addrs, Auth: good})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Partitions(ctx, "seeded"); err != nil {
				t.Fatalf("authenticated: %v", err)
			}
			bad := kafka.Auth{Mechanism: mech, Username: "admin"}.WithPassword("wrong-pw-xyz")
			c2, err := kafka.Dial(kafka.Config{Brokers: addrs, Auth: bad, RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			_, err = c2.Partitions(ctx, "seeded")
			if err == nil {
				t.Fatal("a wrong password was accepted")
			}
			if strings.Contains(err.Error(), "wrong-pw-xyz") {
				t.Fatalf("the password is in the error: %v", err)
			}
		})
	}
}
