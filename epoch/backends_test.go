package epoch_test

import (
	"context"
	"sync"
	"testing"

	"github.com/floe-dev/floe/store"
)

// allBackends returns the real backends every protocol test runs on.
func allBackends(t testing.TB) []backend {
	return []backend{fileBackend(), s3Backend(t)}
}

// countingStore counts calls and bytes written.
type countingStore struct {
	store.Store
	mu                         sync.Mutex
	gets, puts, lists, deletes int
	bytes                      int64
}

func (c *countingStore) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gets, c.puts, c.lists, c.deletes, c.bytes = 0, 0, 0, 0, 0
}

func (c *countingStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Store.Get(ctx, key)
}

func (c *countingStore) Put(ctx context.Context, key string, data []byte, o store.PutOptions) (string, error) {
	c.mu.Lock()
	c.puts++
	c.bytes += int64(len(data))
	c.mu.Unlock()
	return c.Store.Put(ctx, key, data, o)
}

func (c *countingStore) List(ctx context.Context, prefix string) ([]store.ObjectInfo, error) {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return c.Store.List(ctx, prefix)
}

func (c *countingStore) Delete(ctx context.Context, key string) error {
	c.mu.Lock()
	c.deletes++
	c.mu.Unlock()
	return c.Store.Delete(ctx, key)
}
