package flinksql

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/floe-dev/floe/spec"
)

// ttlTwinYAML is what ttlTwinSQL means: a regular join under a state TTL of
// 24 h is an interval join of ±24 h on the two sides' event times.
const ttlTwinYAML = `name: ttl-twin
sources:
  person:
    type: files
    url: /tmp/persons
    format: jsonl
    schema: {id: int64, name: string, dateTime: timestamp}
    event_time: dateTime
    watermark: {max_out_of_orderness: 2s}
  bid:
    type: files
    url: /tmp/bids
    format: parquet
    schema: {auction: int64, bidder: int64, price: int64, url: string, dateTime: timestamp}
    event_time: dateTime
    watermark: {max_out_of_orderness: 2s}
stages:
  - name: out-join
    inputs: [person, bid]
    join: {type: inner, left_on: [id], right_on: [bidder], interval: {lower: 24h, upper: 24h}}
  - name: out-project
    input: out-join
    project: {id: id, name: name, price: price, dateTime: dateTime}
sinks:
  out: {input: out-project, type: files, url: /tmp/out, format: parquet}
state: {url: /tmp/st}
`

const ttlTwinSQL = `SET 'pipeline.name' = 'ttl-twin';
SET 'table.exec.state.ttl' = '24 h';
` + ddl + `CREATE TABLE out (id BIGINT, name STRING, price BIGINT)
WITH ('connector' = 'filesystem', 'path' = '/tmp/out', 'format' = 'parquet');
INSERT INTO out SELECT P.id, P.name, B.price FROM person P JOIN bid B ON P.id = B.bidder;
`

// TestTTLTwin: a regular join under 'table.exec.state.ttl' lowers to exactly
// the pipeline of its YAML twin, an interval join of ±TTL (same spec, same
// graph, so the same plan hash).
func TestTTLTwin(t *testing.T) {
	y, err := spec.Parse("twin.yaml", []byte(ttlTwinYAML), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse("twin.sql", []byte(ttlTwinSQL), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	yj, _ := json.Marshal(y)
	sj, _ := json.Marshal(s)
	if string(yj) != string(sj) {
		t.Errorf("the SQL lowers to\n%s\nits YAML twin decodes to\n%s", sj, yj)
	}
	yg, err := y.Graph()
	if err != nil {
		t.Fatal(err)
	}
	sg, err := s.Graph()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := yg.Describe(), sg.Describe(); a != b {
		t.Errorf("graphs differ:\n%s\n---\n%s", a, b)
	}
}

// loadNexmark reads a bench Nexmark file with its placeholders filled.
func loadNexmark(t *testing.T, name string) *spec.Pipeline {
	t.Helper()
	path := "../bench/nexmark/queries/" + name
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.ReplaceAll(string(data), "${FORMAT}", "parquet")
	src = strings.ReplaceAll(src, "${MAX_DELAY}", "4s")
	src = strings.ReplaceAll(src, "${MAX_DELAY_MS}", "4000")
	src = regexp.MustCompile(`\$\{(STATE|SINK|BIDS|AUCTIONS|PERSONS)\}`).ReplaceAllString(src, "/tmp/$1")
	src = regexp.MustCompile(`\$\{[A-Z_]+\}`).ReplaceAllString(src, "2")
	var p *spec.Pipeline
	if IsSQL(path) {
		p, err = Parse(path, []byte(src), t.TempDir())
	} else {
		p, err = spec.Parse(path, []byte(src), t.TempDir())
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTTLNexmarkTwins: the Nexmark queries that need a state TTL in Flink
// SQL lower to the stage the bench's YAML version of the query writes by
// hand (q18: a keep-last dedup within 24 h).
func TestTTLNexmarkTwins(t *testing.T) {
	stage := func(p *spec.Pipeline, kind string) spec.Stage {
		for _, s := range p.Stages {
			if s.Kind() == kind {
				return s
			}
		}
		t.Fatalf("%s: no %s stage", p.Name, kind)
		return spec.Stage{}
	}
	y, s := loadNexmark(t, "q18.yaml"), loadNexmark(t, "q18.sql")
	yd, _ := json.Marshal(stage(y, spec.KindDedup).Dedup)
	sd, _ := json.Marshal(stage(s, spec.KindDedup).Dedup)
	if string(yd) != string(sd) {
		t.Errorf("q18.sql's dedup %s, q18.yaml's %s", sd, yd)
	}
	if len(s.Stages) != 1+countKind(s, spec.KindProject) {
		t.Errorf("q18.sql lowers to %d stages, want the dedup and projects", len(s.Stages))
	}
}

func countKind(p *spec.Pipeline, kind string) int {
	n := 0
	for _, s := range p.Stages {
		if s.Kind() == kind {
			n++
		}
	}
	return n
}
