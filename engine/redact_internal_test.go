package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// failingLister fails every List (the only method the test calls).
type failingLister struct{ store.Store }

func (failingLister) List(context.Context, string) ([]store.ObjectInfo, error) {
	return nil, errors.New("connection refused")
}

// TestSourceErrorsRedactURL: errors naming the source location show it as
// every printed URL is shown (store.Redact): no user info, no secret
// parameter.
func TestSourceErrorsRedactURL(t *testing.T) {
	p := &spec.Pipeline{Source: spec.Source{URL: "s3://b/in?endpoint=http://ak:sk-secret@127.0.0.1:9000&token=tok-secret", Format: spec.Parquet}}
	_, err := sources.List(context.Background(), p, failingLister{})
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "list source s3://b/in") {
		t.Fatalf("listSource: %v", err)
	}
	_, err = sources.InferSchema(context.Background(), p, failingLister{}, nil)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("schema inference: %v", err)
	}
}
