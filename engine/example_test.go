package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// A pipeline built in Go runs exactly like one read from YAML.
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "floe-example")
	defer os.RemoveAll(dir)
	os.MkdirAll(filepath.Join(dir, "events"), 0o755)
	os.WriteFile(filepath.Join(dir, "events", "a.jsonl"), []byte(
		`{"event_time":"2024-01-01T00:00:10Z","user_id":"u1","page":"/","bytes":100}
{"event_time":"2024-01-01T00:00:20Z","user_id":"u1","page":"/a","bytes":0}
{"event_time":"2024-01-01T00:00:30Z","user_id":"u2","page":"/","bytes":7}
`), 0o644)

	p := spec.New("clicks").
		FromFiles(filepath.Join(dir, "events"), spec.JSONL,
			spec.Col("event_time", spec.TypeTimestamp), spec.Col("user_id", spec.TypeString),
			spec.Col("page", spec.TypeString), spec.Col("bytes", spec.TypeInt64)).
		EventTime("event_time", 5*time.Second).
		Filter("bytes > 0").
		Window(spec.NewTumbling(time.Minute).By("user_id").Agg("clicks", spec.Count, "").Agg("total", spec.Sum, "bytes")).
		ToFiles(filepath.Join(dir, "out"), spec.Parquet).
		StateAt(filepath.Join(dir, "state"), 2)
	res, err := engine.Run(context.Background(), p, engine.Options{Drain: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Files, "file,", res.Rows, "rows,", res.RowsOut, "windows, watermark", engine.FormatWatermark(res.Watermark))
	again, _ := engine.Run(context.Background(), p, engine.Options{})
	fmt.Println("second run:", again.Epochs, "epochs")
	// Output:
	// 1 file, 3 rows, 2 windows, watermark +inf (drained)
	// second run: 0 epochs
}
