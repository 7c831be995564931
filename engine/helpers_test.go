package engine_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/internal/scenario"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// update rewrites golden files: the module's one -rewrite flag
// (internal/scenario), which rewrites scenario files too.
var update = scenario.Rewrite

func TestMain(m *testing.M) { s3test.Main(m) }

func fileURL(dir string) string { return (&url.URL{Scheme: "file", Path: dir}).String() }

// env is where one test pipeline keeps its source, state and sink.
type env struct {
	name                string
	source, state, sink string // URLs
	sourceDir           string // local source directory (file backend), "" for S3
	late, rejected      string
	put                 func(t testing.TB, key string, data []byte)
	remove              func(t testing.TB, key string)
}

func fileEnv(t testing.TB) *env {
	d := t.TempDir()
	src := filepath.Join(d, "events")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	e := &env{name: "file", source: fileURL(src), state: fileURL(filepath.Join(d, "state")), sink: fileURL(filepath.Join(d, "out")),
		late: fileURL(filepath.Join(d, "late")), rejected: "", sourceDir: src}
	e.put = func(t testing.TB, key string, data []byte) {
		// A file lands whole, as an object store's PUT does: written
		// beside the source folder, then renamed into it, so a run
		// listing concurrently (trigger mode) never reads it half written.
		p := filepath.Join(src, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, err := os.CreateTemp(d, ".landing-*")
		if err != nil {
			t.Fatal(err)
		}
		_, err = tmp.Write(data)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func s3Env(t testing.TB) *env {
	srv := s3test.Shared(t)
	u, err := url.Parse(srv.NewBucket(t))
	if err != nil {
		t.Fatal(err)
	}
	b := u.Host
	e := &env{name: "s3", source: srv.URL(b, "in/events"), state: srv.URL(b, "state"), sink: srv.URL(b, "out/clicks"),
		late: srv.URL(b, "late")}
	st, err := store.Open(context.Background(), e.source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.put = func(t testing.TB, key string, data []byte) {
		if _, err := st.Put(context.Background(), key, data, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func bothEnvs(t *testing.T, f func(t *testing.T, newEnv func(testing.TB) *env)) {
	t.Run("file", func(t *testing.T) { f(t, fileEnv) })
	t.Run("s3", func(t *testing.T) { f(t, s3Env) })
}

// pipeline parses a spec template; {{source}}, {{state}}, {{sink}}, {{late}}
// are replaced by the env's URLs.
func (e *env) pipeline(t testing.TB, tmpl string) *spec.Pipeline {
	t.Helper()
	r := strings.NewReplacer("{{source}}", e.source, "{{state}}", e.state, "{{sink}}", e.sink, "{{late}}", e.late)
	p, err := spec.Parse("test.yaml", []byte(r.Replace(tmpl)), t.TempDir())
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return p
}

func run(t testing.TB, p *spec.Pipeline, opts engine.Options) *engine.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := engine.Run(ctx, p, opts)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// committedRows reads every committed output file and returns its rows as
// sorted strings.
func committedRows(t testing.TB, p *spec.Pipeline) []string {
	t.Helper()
	ctx := context.Background()
	outs, err := engine.Outputs(ctx, p)
	if err != nil {
		t.Fatalf("outputs: %v", err)
	}
	sink, err := store.Open(ctx, p.Sink.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	seen := map[string]bool{}
	var rows []string
	for _, o := range outs {
		if seen[o] {
			t.Fatalf("output %s listed twice", o)
		}
		seen[o] = true
		data, _, err := sink.Get(ctx, o)
		if err != nil {
			t.Fatalf("committed output %s: %v", o, err)
		}
		rows = append(rows, parquetRows(t, data)...)
	}
	slices.Sort(rows)
	return rows
}

func parquetRows(t testing.TB, data []byte) []string {
	t.Helper()
	_, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, rec := range recs {
		rows = append(rows, recordRows(rec)...)
	}
	return rows
}

func recordRows(rec arrow.RecordBatch) []string {
	var rows []string
	for i := 0; i < int(rec.NumRows()); i++ {
		var parts []string
		for c, col := range rec.Columns() {
			v := col.ValueStr(i)
			if ts, ok := col.(*array.Timestamp); ok && ts.IsValid(i) {
				v = time.UnixMicro(int64(ts.Value(i))).UTC().Format(time.RFC3339)
			}
			parts = append(parts, rec.ColumnName(c)+"="+v)
		}
		rows = append(rows, strings.Join(parts, ","))
	}
	return rows
}

// genData writes a deterministic clickstream into the env's source.
func genData(t testing.TB, e *env, opts datagen.Options) {
	t.Helper()
	if err := datagen.Generate(opts, func(name string, data []byte) error {
		e.put(t, name, data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func jsonl(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

func ev(ts, user string, bytes int) string {
	return fmt.Sprintf(`{"event_time":"2024-01-01T%sZ","user_id":"%s","page":"/p","bytes":%d}`, ts, user, bytes)
}

func listKeys(t testing.TB, u string) []string {
	t.Helper()
	s, err := store.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	objs, err := s.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys
}
