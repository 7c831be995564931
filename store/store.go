package store

import (
	"context"
	"errors"
	"sort"
	"time"
)

// Sentinel errors. Implementations wrap them with the operation and key, so
// callers test with errors.Is.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrPrecondition: a conditional write lost. For IfNotExist the object
	// already exists; for IfMatch its current ETag differs (or it is absent).
	// The write did not apply. Never retried.
	ErrPrecondition = errors.New("precondition failed")
	// ErrTransient: throttling (503 SlowDown), a timeout, a connection reset,
	// or S3's 409 ConditionalRequestConflict. The operation may be retried;
	// for a write its outcome is unknown.
	ErrTransient = errors.New("transient storage error")
	// ErrCrashed is returned by the fault-injecting wrapper after a simulated
	// crash: every call after the crash point fails with it.
	ErrCrashed = errors.New("simulated crash")
)

// PutOptions select a conditional write. At most one of IfNotExist and
// IfMatch may be set.
type PutOptions struct {
	// IfNotExist creates the object only if no object exists under the key
	// (S3: If-None-Match: *). Atomic, also across processes.
	IfNotExist bool
	// IfMatch replaces the object only if its current ETag equals this value
	// (S3: If-Match). Atomic, also across processes.
	IfMatch string
}

// ObjectInfo describes one listed object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Store is the object I/O floe needs. Keys are slash-separated, never start
// with "/", and never contain "." or ".." segments. All methods are safe for
// concurrent use.
type Store interface {
	// Get returns the whole object and its ETag, or ErrNotFound.
	Get(ctx context.Context, key string) (data []byte, etag string, err error)
	// Put writes the whole object atomically (readers see the old or the new
	// object, never a mix) and returns the new ETag. With a condition that
	// fails it returns ErrPrecondition and changes nothing.
	Put(ctx context.Context, key string, data []byte, opts PutOptions) (etag string, err error)
	// List returns every object whose key starts with prefix, sorted by key
	// (byte order). It lists all objects, not only those at one level.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes the object. Deleting an absent object is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases resources. The Store must not be used afterwards.
	Close() error
}

// Reader is an optional interface for reading an object without its ETag,
// which a backend may have to compute (file:// and mem:// hash the content).
// Use the Read function rather than asserting it.
type Reader interface {
	Read(ctx context.Context, key string) ([]byte, error)
}

// Read returns the whole object, or ErrNotFound. It skips the ETag where the
// store can (Reader), which makes reading large input files cheaper.
func Read(ctx context.Context, s Store, key string) ([]byte, error) {
	if r, ok := s.(Reader); ok {
		return r.Read(ctx, key)
	}
	data, _, err := s.Get(ctx, key)
	return data, err
}

// ListerAfter is an optional interface for listing from a start key: the
// cost of the listing follows what sorts after the key, not everything
// under the prefix (S3: ListObjectsV2 with StartAfter; file://: a sorted
// directory walk that skips the directories before the key). Every store
// of this package and its wrappers implement it. Use the ListAfter
// function rather than asserting it.
type ListerAfter interface {
	// ListAfter is List restricted to the keys that sort after after
	// (byte order; after itself excluded). An empty after lists all.
	ListAfter(ctx context.Context, prefix, after string) ([]ObjectInfo, error)
}

// ListAfter returns the objects under prefix whose keys sort after after,
// sorted by key. A store without ListerAfter lists everything and filters
// (same result, full cost).
func ListAfter(ctx context.Context, s Store, prefix, after string) ([]ObjectInfo, error) {
	if after == "" {
		return s.List(ctx, prefix)
	}
	if l, ok := s.(ListerAfter); ok {
		return l.ListAfter(ctx, prefix, after)
	}
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	i := sort.Search(len(objs), func(i int) bool { return objs[i].Key > after })
	return objs[i:], nil
}
