package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// fileStore is the file:// Store. It uses package os directly rather than
// gocloud's fileblob: fileblob's IfNotExist is a stat-then-rename guarded by an
// in-process mutex, its temp files live next to the objects, and it cannot
// hold a lock across read-compare-write. Owning the whole path keeps temp,
// lock and object files consistent.
//
// Layout under root:
//
//	<key>                          the object
//	.floe-tmp/<random>             temp files, linked or renamed into place
//	.floe-locks/<n>.lock           flock(2) stripes; a key uses stripe fnv32(key) % lockStripes
//
// Every segment starting with ".floe-" is hidden from List at any depth (so a
// store rooted inside another one does not leak its temp files either).
type fileStore struct {
	root     string
	tmpDir   string
	lockDir  string
	dirsOnce sync.Once
	dirsErr  error
	reqs     reqCounter // one per Store call
}

var (
	_ Store          = (*fileStore)(nil)
	_ RequestCounter = (*fileStore)(nil)
	_ ListerAfter    = (*fileStore)(nil)
)

// Requests implements RequestCounter: one per Store call.
func (s *fileStore) Requests() Requests { return s.reqs.Requests() }

const (
	lockStripes = 64
	// staleTemp is the age after which Open removes leftover temp files of
	// crashed writers.
	staleTemp = time.Hour
)

func openFile(root string) (*fileStore, error) {
	s := &fileStore{
		root:    root,
		tmpDir:  filepath.Join(root, reservedPrefix+"tmp"),
		lockDir: filepath.Join(root, reservedPrefix+"locks"),
	}
	// Directories are created on the first write, not here: opening a store
	// to read (a pipeline's source) must leave the directory untouched.
	s.sweepTemp()
	return s, nil
}

// ensureDirs creates the root, temp and lock directories before a write.
func (s *fileStore) ensureDirs() error {
	s.dirsOnce.Do(func() {
		for _, d := range []string{s.root, s.tmpDir, s.lockDir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				s.dirsErr = fmt.Errorf("create directory: %w", err)
				return
			}
		}
	})
	return s.dirsErr
}

// sweepTemp removes temp files older than staleTemp, best effort.
func (s *fileStore) sweepTemp() {
	ents, err := os.ReadDir(s.tmpDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
			_ = os.Remove(filepath.Join(s.tmpDir, e.Name()))
		}
	}
}

func (s *fileStore) path(key string) string {
	return filepath.Join(s.root, filepath.FromSlash(key))
}

// Get implements Store.
func (s *fileStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	data, err := s.read(ctx, key)
	if err != nil {
		return nil, "", err
	}
	return data, contentETag(data), nil
}

var _ Reader = (*fileStore)(nil)

// Read implements Reader: Get without computing the ETag.
func (s *fileStore) Read(ctx context.Context, key string) ([]byte, error) {
	return s.read(ctx, key)
}

func (s *fileStore) read(ctx context.Context, key string) ([]byte, error) {
	s.reqs.count(OpGet)
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("store: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, wrapErr("get", key, err)
	}
	data, err := os.ReadFile(s.path(key))
	if err != nil {
		if isAbsent(err) {
			return nil, fmt.Errorf("store: get %q: %w", key, ErrNotFound)
		}
		return nil, wrapErr("get", key, err)
	}
	return data, nil
}

// isAbsent reports errors that mean "no object under this key": the file
// does not exist, a parent is a file, or the key names a directory.
func isAbsent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

// Put implements Store.
func (s *fileStore) Put(ctx context.Context, key string, data []byte, opts PutOptions) (string, error) {
	s.reqs.count(OpPut)
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("store: put: %w", err)
	}
	if err := checkPutOptions(opts); err != nil {
		return "", fmt.Errorf("store: put %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return "", wrapErr("put", key, err)
	}
	if err := s.ensureDirs(); err != nil {
		return "", wrapErr("put", key, err)
	}
	// Write and fsync the temp file before taking the lock: the lock is held
	// only for the compare and the link/rename.
	tmp, err := s.writeTemp(data)
	if err != nil {
		return "", wrapErr("put", key, err)
	}
	defer os.Remove(tmp) // no-op after a rename; removes the extra link after a link
	unlock, err := s.lock(key)
	if err != nil {
		return "", wrapErr("put", key, err)
	}
	defer unlock()
	dst := s.path(key)
	switch {
	case opts.IfNotExist:
		err = s.place(dst, func() error { return os.Link(tmp, dst) })
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("store: put %q: if-not-exist: object exists: %w", key, ErrPrecondition)
		}
	case opts.IfMatch != "":
		cur, rerr := os.ReadFile(dst)
		if rerr != nil {
			if isAbsent(rerr) {
				return "", fmt.Errorf("store: put %q: if-match on absent object: %w", key, ErrPrecondition)
			}
			return "", wrapErr("put", key, rerr)
		}
		if got := contentETag(cur); got != opts.IfMatch {
			return "", fmt.Errorf("store: put %q: if-match %s: current etag is %s: %w", key, opts.IfMatch, got, ErrPrecondition)
		}
		err = os.Rename(tmp, dst)
	default:
		err = s.place(dst, func() error { return os.Rename(tmp, dst) })
	}
	if err != nil {
		return "", wrapErr("put", key, err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return "", wrapErr("put", key, err)
	}
	return contentETag(data), nil
}

// place runs op (a link or rename to dst), creating dst's directory first.
// A concurrent Delete may remove an emptied directory between MkdirAll and op,
// so ENOENT is retried a few times.
func (s *fileStore) place(dst string, op func() error) error {
	var err error
	for range 5 {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err = op(); !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return err
}

func (s *fileStore) writeTemp(data []byte) (string, error) {
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	name := filepath.Join(s.tmpDir, hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("create temp file: %w", err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(name)
		return "", fmt.Errorf("write temp file: %w", werr)
	}
	return name, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

// lock takes the cross-process lock stripe of key.
func (s *fileStore) lock(key string) (unlock func(), err error) {
	if err := s.ensureDirs(); err != nil {
		return nil, err
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	name := filepath.Join(s.lockDir, fmt.Sprintf("%02d.lock", h.Sum32()%lockStripes))
	return lockFile(name)
}

// List implements Store.
func (s *fileStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	return s.ListAfter(ctx, prefix, "")
}

// ListAfter implements ListerAfter: the walk skips every directory whose
// keys all sort before after (a sorted directory walk from the start key,
// as S3's StartAfter), so its cost follows what comes after it.
func (s *fileStore) ListAfter(ctx context.Context, prefix, after string) ([]ObjectInfo, error) {
	s.reqs.count(OpList)
	// Walk only the deepest directory the prefix names.
	start := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = s.path(prefix[:i])
	}
	var out []ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isAbsent(err) {
				return nil // vanished under a concurrent Delete, or no such prefix
			}
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if strings.HasPrefix(d.Name(), reservedPrefix) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			// Every key under the directory starts with dir; if after
			// does not, they all sort on one side of it.
			if dir := key + "/"; after != "" && rel != "." && dir < after && !strings.HasPrefix(after, dir) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(key, prefix) || key <= after {
			return nil
		}
		info, err := d.Info()
		if err == nil && info.Mode()&fs.ModeSymlink != 0 {
			info, err = os.Stat(p) // a symlinked file is listed as the file it names
		}
		if err != nil {
			if isAbsent(err) {
				return nil
			}
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		out = append(out, ObjectInfo{Key: key, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, wrapErr("list", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements Store. It also removes the directories the delete left
// empty, up to the root.
func (s *fileStore) Delete(ctx context.Context, key string) error {
	s.reqs.count(OpDelete)
	if err := checkKey(key); err != nil {
		return fmt.Errorf("store: delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return wrapErr("delete", key, err)
	}
	unlock, err := s.lock(key)
	if err != nil {
		return wrapErr("delete", key, err)
	}
	defer unlock()
	p := s.path(key)
	info, err := os.Lstat(p)
	if err != nil {
		if isAbsent(err) {
			return nil
		}
		return wrapErr("delete", key, err)
	}
	if info.IsDir() {
		return nil // a prefix, not an object
	}
	if err := os.Remove(p); err != nil && !isAbsent(err) {
		return wrapErr("delete", key, err)
	}
	for dir := filepath.Dir(p); dir != s.root && strings.HasPrefix(dir, s.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break // not empty (or already gone): stop
		}
	}
	return nil
}

// Close implements Store.
func (s *fileStore) Close() error { return nil }
