package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/floe-dev/floe/kafka"
	"github.com/floe-dev/floe/kafka/kafkatest"
)

// TestSourceListAndRead: the listing starts at the committed offsets, is
// cut into epochs (max records) and ranges (range offsets) in epoch order,
// and a range reads as one line per offset with the metadata columns.
func TestSourceListAndRead(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic("src", 2)
	var ms []kafkatest.Msg
	for i := 0; i < 12; i++ {
		ms = append(ms, kafkatest.Msg{Partition: 0, Key: fmt.Sprintf("k%d", i), Value: fmt.Sprintf(`{"i":%d}`, i)})
	}
	ms = append(ms, kafkatest.Msg{Partition: 1, Value: "1,a"}, kafkatest.Msg{Partition: 1, Value: "{}"})
	b.Produce(topic, ms...)
	src, err := kafka.OpenSource(kafka.SourceConfig{Client: b.Config(), Topics: []string{topic}, Format: "jsonl",
		MaxRecords: 6, RangeOffsets: 4, Columns: kafka.Columns{Partition: "p", Offset: "o", Key: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx := context.Background()
	p0 := kafka.Partition{Topic: topic, Partition: 0}
	src.SetCommitted(map[kafka.Partition]int64{p0: 2}, 0)
	objs, err := src.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, strings.TrimPrefix(o.Key, topic+"/"))
	}
	// Epoch 1: 6 records shared by p0 (from 2) and p1 (2 records): p0 4, p1 2;
	// epoch 2: p0 6..10 (6 more, cut at 4); epoch 3: p0 10..12.
	if got, want := strings.Join(keys, " "), "0/2-6 1/0-2 0/6-10 0/10-12"; got != want {
		t.Fatalf("listing = %s, want %s", got, want)
	}
	data, err := src.Read(ctx, topic+"/0/2-6")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"p":0,"o":2,"k":"k2","i":2}` + "\n" + `{"p":0,"o":3,"k":"k3","i":3}` + "\n" +
		`{"p":0,"o":4,"k":"k4","i":4}` + "\n" + `{"p":0,"o":5,"k":"k5","i":5}` + "\n"
	if string(data) != want {
		t.Fatalf("rendered:\n%s\nwant\n%s", data, want)
	}
	data, err = src.Read(ctx, topic+"/1/0-2")
	if err != nil {
		t.Fatal(err)
	}
	// A value that is no JSON object passes as it is (the decoder rejects
	// it); an empty object gets the columns alone.
	if want := "1,a\n" + `{"p":1,"o":1,"k":null}` + "\n"; string(data) != want {
		t.Fatalf("rendered:\n%q\nwant\n%q", data, want)
	}
	if base, _ := src.Base(); base[p0] != 2 || base[kafka.Partition{Topic: topic, Partition: 1}] != 0 {
		t.Fatalf("base = %v", base)
	}
	if _, err := src.Read(ctx, "not-a-range"); err == nil {
		t.Fatal("a key that is no range read")
	}
}

// TestRenderGapsAndCSV: offsets without a data record are empty lines, so
// line N is offset from+N-1; CSV rows get the metadata columns appended.
func TestRenderGapsAndCSV(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic("csv", 1)
	b.Produce(topic, kafkatest.Msg{Value: "1,x"}, kafkatest.Msg{Value: "2,y"}, kafkatest.Msg{Key: "a,b", Value: "3,z"})
	src, err := kafka.OpenSource(kafka.SourceConfig{Client: b.Config(), Topics: []string{topic}, Format: "csv",
		Columns: kafka.Columns{Offset: "o", Key: "k"}, SkipMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b.DeleteRecords(topic, 0, 1)
	key := topic + "/0/0-3"
	data, err := src.Read(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if want := "\n2,y,1,\n3,z,2,\"a,b\"\n"; string(data) != want {
		t.Fatalf("rendered %q, want %q", data, want)
	}
	if src.Skipped(key) != 1 {
		t.Fatalf("skipped = %d, want 1", src.Skipped(key))
	}
}
