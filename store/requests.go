package store

import (
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
)

// Requests counts the requests a store sent to its backend, by kind, as an
// S3 bill counts them: every LIST page (S3 returns at most 1,000 keys per
// ListObjectsV2 request), every GET and ranged GET, every HEAD (billed as a
// GET), every part of a multipart upload with its create and complete
// requests (billed as PUTs), every DELETE, and every retry of any of them.
// For S3 they are counted at the HTTP client, one per request sent, so they
// equal what the server received. file:// and mem:// have no requests; they
// count one per Store call (List included, however many keys it returns).
type Requests struct {
	Get    int64 // GetObject (whole or ranged) and HeadObject
	Put    int64 // PutObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload
	List   int64 // ListObjectsV2 pages
	Delete int64 // DeleteObject, DeleteObjects, AbortMultipartUpload
}

// Add returns r plus o.
func (r Requests) Add(o Requests) Requests {
	return Requests{r.Get + o.Get, r.Put + o.Put, r.List + o.List, r.Delete + o.Delete}
}

// Sub returns r minus o.
func (r Requests) Sub(o Requests) Requests {
	return Requests{r.Get - o.Get, r.Put - o.Put, r.List - o.List, r.Delete - o.Delete}
}

// Total returns the requests of every kind.
func (r Requests) Total() int64 { return r.Get + r.Put + r.List + r.Delete }

// RequestCounter is implemented by the stores Open returns and by the
// wrappers of this package (Retrying, Faulty), which pass it through. Use
// CountRequests rather than asserting it.
type RequestCounter interface {
	// Requests returns the requests sent so far.
	Requests() Requests
}

// CountRequests returns the requests s sent so far, and false when s does
// not count them (a wrapper of another package that does not pass
// RequestCounter through).
func CountRequests(s Store) (Requests, bool) {
	if c, ok := s.(RequestCounter); ok {
		return c.Requests(), true
	}
	return Requests{}, false
}

// reqCounter holds a backend's request counters.
type reqCounter struct{ get, put, list, del atomic.Int64 }

func (c *reqCounter) Requests() Requests {
	return Requests{c.get.Load(), c.put.Load(), c.list.Load(), c.del.Load()}
}

func (c *reqCounter) count(op Op) {
	switch op {
	case OpGet:
		c.get.Add(1)
	case OpPut:
		c.put.Add(1)
	case OpList:
		c.list.Add(1)
	case OpDelete:
		c.del.Add(1)
	}
}

// S3Op classifies an S3 HTTP request as a Store operation kind, the way
// Requests counts it: a GET of the bucket itself (ListObjectsV2 and other
// bucket reads) is a list, any other GET or a HEAD a get, PUT and POST puts
// (POST ?delete is DeleteObjects: a delete), DELETE a delete. It is exported
// for tests that count at a proxy in front of the server.
func S3Op(method, path, rawQuery string, pathStyle bool) Op {
	switch method {
	case http.MethodGet:
		if strings.Contains("&"+rawQuery, "&list-type=") || bucketOnly(path, pathStyle) {
			return OpList
		}
		return OpGet
	case http.MethodHead:
		return OpGet
	case http.MethodPut:
		return OpPut
	case http.MethodPost:
		if strings.Contains("&"+rawQuery, "&delete") {
			return OpDelete
		}
		return OpPut
	case http.MethodDelete:
		return OpDelete
	}
	return OpGet
}

// bucketOnly reports whether path names a bucket, not an object.
func bucketOnly(path string, pathStyle bool) bool {
	p := strings.Trim(path, "/")
	if !pathStyle {
		return p == ""
	}
	return p != "" && !strings.Contains(p, "/")
}

// countingTransport counts every request it writes to a connection: each
// retry of the store's, and each retry net/http makes by itself (it sends
// an idempotent request again when a reused connection breaks before an
// answer), which one RoundTrip would hide.
type countingTransport struct {
	base      http.RoundTripper
	c         *reqCounter
	pathStyle bool
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := S3Op(req.Method, req.URL.Path, req.URL.RawQuery, t.pathStyle)
	// Counted when written, even if the write failed: the server may
	// have read the headers and answered before the body broke off.
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { t.c.count(op) }}
	return t.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
}
