// Package s3test runs a real S3 server for tests: versitygw (Apache-2.0, an S3
// gateway over a POSIX directory, which enforces If-None-Match and If-Match),
// pinned in tools/go.mod, built once per machine and cached, and started on a
// free 127.0.0.1 port.
//
// Tests never skip for want of it: if versitygw cannot be built or started
// the test fails (building needs the Go module proxy or a warm module cache).
//
// Typical use, one server per test binary:
//
//	func TestMain(m *testing.M) { s3test.Main(m) }
//
//	func TestX(t *testing.T) {
//		url := s3test.Shared(t).NewBucket(t) // s3://floe-3-testx?endpoint=...
//		...
//	}
//
// The server's credentials are fixed test values, exported to this process's
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) so that the standard
// AWS credential chain, and child processes, find them.
package s3test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Fixed test credentials and region of every server this package starts.
const (
	AccessKey = "floetestaccess"
	SecretKey = "floetestsecretkey0123456789"
	Region    = "us-east-1"
)

const versitygwPkg = "github.com/versity/versitygw/cmd/versitygw"

// Server is a running versitygw.
type Server struct {
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:40123.
	Endpoint string
	// Dir is the POSIX directory the gateway serves (one subdirectory per bucket).
	Dir string

	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	client  *s3.Client
	buckets atomic.Int64
	stop    sync.Once
}

// Start starts a private server that is stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start(t.TempDir())
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

var shared struct {
	mu  sync.Mutex
	s   *Server
	dir string
	err error
}

// Shared returns the server shared by every test of this test binary,
// starting it on first use. Main stops it; without Main it dies with the test
// process (on Linux through the parent-death signal).
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.s == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "floe-s3test-")
		if shared.err == nil {
			shared.s, shared.err = start(shared.dir)
		}
	}
	if shared.err != nil {
		t.Fatalf("s3test: %v", shared.err)
	}
	return shared.s
}

// Main runs the tests, stops the shared server and exits. Call it from
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	if shared.s != nil {
		shared.s.Stop()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// URL returns a store URL for bucket and an optional key prefix.
func (s *Server) URL(bucket, prefix string) string {
	u := url.URL{Scheme: "s3", Host: bucket}
	if prefix != "" {
		u.Path = "/" + strings.Trim(prefix, "/")
	}
	q := url.Values{}
	q.Set("endpoint", s.Endpoint)
	q.Set("use_path_style", "true")
	q.Set("region", Region)
	u.RawQuery = q.Encode()
	return u.String()
}

// Via returns storeURL (an s3:// URL of this package) with its endpoint
// parameter replaced by endpoint, e.g. a faultproxy in front of the server.
func Via(storeURL, endpoint string) string {
	u, err := url.Parse(storeURL)
	if err != nil {
		panic(fmt.Sprintf("s3test.Via: %v", err))
	}
	q := u.Query()
	q.Set("endpoint", endpoint)
	u.RawQuery = q.Encode()
	return u.String()
}

// NewBucket creates a fresh, empty bucket named after the test and returns
// its store URL.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := bucketName(s.buckets.Add(1), t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("s3test: create bucket %s: %v", name, err)
	}
	return s.URL(name, "")
}

// bucketName makes a valid, unique S3 bucket name (3-63 of [a-z0-9-]).
func bucketName(n int64, testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := fmt.Sprintf("floe-%d-%s", n, b.String())
	if len(name) > 63 {
		name = name[:63]
	}
	return strings.TrimRight(name, "-")
}

// Stop kills the server and waits for it to exit. It is idempotent.
func (s *Server) Stop() {
	s.stop.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

func start(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	setEnv()
	var lastErr error
	for try := range 3 { // a free port can be taken between probe and bind
		s, err := launch(bin, dir, data, try)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// setEnv exports the test credentials for the standard AWS chain.
func setEnv() {
	os.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	os.Unsetenv("AWS_SESSION_TOKEN")
	os.Unsetenv("AWS_PROFILE")
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func launch(bin, dir, data string, try int) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(dir, fmt.Sprintf("versitygw-%d.log", try))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--region", Region,
		"--port", addr, "--quiet", "posix", data)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	// Keep the server's own AWS settings out of its environment.
	cmd.Env = filterEnv(os.Environ(), "AWS_", "ROOT_ACCESS", "ROOT_SECRET", "VGW_")
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	s := &Server{Endpoint: "http://" + addr, Dir: data, cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	if err := s.waitReady(20 * time.Second); err != nil {
		s.Stop()
		return nil, fmt.Errorf("versitygw on %s: %w; log %s:\n%s", addr, err, logPath, tail(logPath))
	}
	s.client = s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
	return s, nil
}

func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-s.exited:
			return errors.New("exited before answering")
		default:
		}
		resp, err := hc.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			if resp.Header.Get("Server") != "" || resp.StatusCode > 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %v: %v", limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func filterEnv(env []string, dropPrefixes ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		drop := false
		for _, p := range dropPrefixes {
			if strings.HasPrefix(kv, p) {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

var binary struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the versitygw binary, building it on first use:
// `go build -modfile=<repo>/tools/go.mod` into os.UserCacheDir()/floe, under
// a name derived from tools/go.mod, tools/go.sum and the Go version, so a
// machine builds each pinned version once. Concurrent test binaries serialise
// the build with a lock file.
func Binary() (string, error) {
	binary.once.Do(func() { binary.path, binary.err = build() })
	return binary.path, binary.err
}

func build() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, "tools", f))
		if err != nil {
			return "", fmt.Errorf("read tool module: %w", err)
		}
		h.Write(b)
	}
	fmt.Fprintf(h, "%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "floe")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cache dir: %w", err)
	}
	out := filepath.Join(dir, "versitygw-"+hex.EncodeToString(h.Sum(nil))[:16])
	if isExecutable(out) {
		return out, nil
	}
	unlock, err := lockFile(out + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(out) { // built by another process while we waited
		return out, nil
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	tmp := fmt.Sprintf("%s.tmp-%d", out, os.Getpid())
	cmd := exec.Command(gobin, "build", "-modfile="+filepath.Join(root, "tools", "go.mod"), "-o", tmp, versitygwPkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("build versitygw (%s): %w\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("install versitygw: %w", err)
	}
	return out, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// repoRoot walks up from the working directory (a test runs in its package
// directory) to the directory holding go.mod and tools/go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isFile(filepath.Join(dir, "go.mod")) && isFile(filepath.Join(dir, "tools", "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root (a directory with go.mod and tools/go.mod) above the working directory")
		}
		dir = parent
	}
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func lockFile(name string) (func(), error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open build lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return func() { f.Close() }, nil
}
