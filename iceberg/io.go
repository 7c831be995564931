package iceberg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	icebergio "github.com/apache/iceberg-go/io"

	"github.com/floe-dev/floe/store"
)

// storeIO is iceberg-go's file system over a floe store.Store rooted at the
// table location: iceberg-go names files by full URI (the location recorded
// in the table metadata, plus "/metadata/..." or "/data/..."), storeIO maps
// them to store keys relative to the root. Names outside the location are
// refused.
//
// Remove only deletes keys under metadata/: the data files are the engine's,
// and nothing iceberg-go does on floe's behalf may delete them.
type storeIO struct {
	ctx context.Context
	st  store.Store
	loc string // canonical table location, no trailing slash
	// alt is a second accepted prefix: the bare path of a file:// location
	// (iceberg-go sometimes hands local paths without the scheme).
	alt string
}

var (
	_ icebergio.IO          = (*storeIO)(nil)
	_ icebergio.ReadFileIO  = (*storeIO)(nil)
	_ icebergio.WriteFileIO = (*storeIO)(nil)
)

func newStoreIO(ctx context.Context, st store.Store, loc string) *storeIO {
	io := &storeIO{ctx: ctx, st: st, loc: loc}
	if rest, ok := strings.CutPrefix(loc, "file://"); ok && strings.HasPrefix(rest, "/") {
		io.alt = rest
	}
	return io
}

// key maps an iceberg-go file name to a store key.
func (s *storeIO) key(name string) (string, error) {
	for _, prefix := range []string{s.loc, s.alt} {
		if prefix == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(name, prefix+"/"); ok && rest != "" {
			return rest, nil
		}
	}
	return "", fmt.Errorf("%w: %q is outside the table location %q", fs.ErrInvalid, name, s.loc)
}

func pathErr(op, name string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// ReadFile reads the whole object.
func (s *storeIO) ReadFile(name string) ([]byte, error) {
	k, err := s.key(name)
	if err != nil {
		return nil, pathErr("read", name, err)
	}
	data, err := store.Read(s.ctx, s.st, k)
	if err != nil {
		return nil, pathErr("read", name, err)
	}
	return data, nil
}

// Open reads the whole object (the store has no ranged reads) and serves it
// from memory.
func (s *storeIO) Open(name string) (icebergio.File, error) {
	data, err := s.ReadFile(name)
	if err != nil {
		if pe, ok := err.(*fs.PathError); ok {
			pe.Op = "open"
		}
		return nil, err
	}
	return &memFile{Reader: bytes.NewReader(data), name: path.Base(name), size: int64(len(data))}, nil
}

// Remove deletes the object, only under metadata/.
func (s *storeIO) Remove(name string) error {
	k, err := s.key(name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	if !strings.HasPrefix(k, metadataPrefix) {
		return pathErr("remove", name, fmt.Errorf("%w: floe's iceberg layer deletes only files under %s", fs.ErrPermission, metadataPrefix))
	}
	if err := s.st.Delete(s.ctx, k); err != nil {
		return pathErr("remove", name, err)
	}
	return nil
}

// WriteFile writes the whole object (unconditionally: iceberg-go names every
// manifest and manifest list with a fresh UUID).
func (s *storeIO) WriteFile(name string, p []byte) error {
	k, err := s.key(name)
	if err != nil {
		return pathErr("write", name, err)
	}
	if _, err := s.st.Put(s.ctx, k, p, store.PutOptions{}); err != nil {
		return pathErr("write", name, err)
	}
	return nil
}

// Create returns a writer that buffers and writes the object on Close.
func (s *storeIO) Create(name string) (icebergio.FileWriter, error) {
	if _, err := s.key(name); err != nil {
		return nil, pathErr("create", name, err)
	}
	return &bufWriter{io: s, name: name}, nil
}

type bufWriter struct {
	bytes.Buffer
	io     *storeIO
	name   string
	closed bool
}

func (w *bufWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	return w.io.WriteFile(w.name, w.Bytes())
}

type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f *memFile) Stat() (fs.FileInfo, error) { return fileInfo{name: f.name, size: f.size}, nil }
func (f *memFile) Close() error               { return nil }

type fileInfo struct {
	name string
	size int64
}

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) Size() int64        { return fi.size }
func (fi fileInfo) Mode() fs.FileMode  { return 0o444 }
func (fi fileInfo) ModTime() time.Time { return time.Time{} }
func (fi fileInfo) IsDir() bool        { return false }
func (fi fileInfo) Sys() any           { return nil }

// FileIO returns the table's files as an iceberg-go file IO that reads and
// writes through the table's store (Remove only under metadata/): with
// Head's MetadataLocation, iceberg-go's catalog-less reader
// (table.NewFromLocation) opens the current version, also on S3 endpoints
// only floe's store knows. ctx bounds every request made through it.
func (t *Table) FileIO(ctx context.Context) icebergio.IO { return newStoreIO(ctx, t.st, t.loc) }
