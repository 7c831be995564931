package spec_test

import (
	"fmt"
	"time"

	"github.com/floe-dev/floe/spec"
)

// A pipeline built in Go is the same value a spec file decodes into.
func ExampleNew() {
	p := spec.New("clicks-per-user").
		FromFiles("file:///data/events", spec.JSONL,
			spec.Col("event_time", spec.TypeTimestamp),
			spec.Col("user_id", spec.TypeString),
			spec.Col("page", spec.TypeString),
			spec.Col("bytes", spec.TypeInt64)).
		EventTime("event_time", 5*time.Second).
		Filter("bytes > 0").
		Window(spec.NewTumbling(time.Minute).By("user_id").Lateness(30*time.Second).
			Agg("clicks", spec.Count, "").
			Agg("total_bytes", spec.Sum, "bytes")).
		ToFiles("file:///data/out/clicks", spec.Parquet).
		StateAt("s3://bucket/floe?endpoint=http://127.0.0.1:9000", 4)
	if err := p.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range p.Operators {
		fmt.Println(op.ID, op.Kind())
	}
	fmt.Println(p.State.Parallelism, p.State.MaxParallelism, p.State.RetainEpochs)

	// Validate reports every problem, each with its field path.
	p.Operators[1].Window.Aggregates[1].Func = "summ"
	p.State.Parallelism = 0
	fmt.Println(p.Validate())
	// Output:
	// filter filter
	// window window
	// 4 128 10
	// operators[1].window.aggregates.total_bytes: unknown function "summ" (did you mean sum?)
	// state.parallelism: must be between 1 and max_parallelism (128), got 0
}

// Parse reports each problem with the file, line and column.
func ExampleParse() {
	const text = `name: clicks
source: {type: files, url: ../events, format: jsonl,
         schema: {ts: timestamp, user: string}, event_time: ts, max_file_per_epoch: 8}
operators:
  - window: {key: user, tumbling: 1 minute, aggregates: {n: "count()"}}
sink: {type: files, url: ../out, format: parquet}
state: {url: ../.floe}
`
	_, err := spec.Parse("clicks.yaml", []byte(text), "/srv/pipelines")
	fmt.Println(err)
	// Output:
	// clicks.yaml:3:65: source.max_file_per_epoch: unknown field (did you mean max_files_per_epoch?)
	// clicks.yaml:5:35: operators[0].window.tumbling: invalid duration "1 minute" (use Go syntax like 1m, 30s)
}
