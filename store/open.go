package store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/blob/s3blob"
)

// floeParamPrefix marks query parameters that belong to floe, not to gocloud.
const floeParamPrefix = "floe_"

// Open opens the Store named by rawURL: file:///abs/dir (or a plain absolute
// path), mem://, or s3://bucket[/prefix]?endpoint=...&use_path_style=true&region=....
// See the package documentation for the details of each scheme.
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the URL: show only the redacted form.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("store: open %q: parse url: %w", Redact(rawURL), err)
	}
	shown := Redact(rawURL) // never show credentials, not even a user name
	if u.User != nil {
		return nil, fmt.Errorf("store: open %q: credentials in the URL are not accepted; they come from the AWS credential chain (environment, shared config, instance or pod role)", shown)
	}
	q := u.Query()
	if err := checkEndpoint(q.Get("endpoint")); err != nil {
		return nil, fmt.Errorf("store: open %q: %w", shown, err)
	}
	for k := range q {
		if strings.HasPrefix(k, floeParamPrefix) {
			q.Del(k)
		}
	}
	var s Store
	switch u.Scheme {
	case "":
		if !filepath.IsAbs(rawURL) {
			return nil, fmt.Errorf("store: open %q: a plain path must be absolute (or use file:///abs/dir)", shown)
		}
		s, err = openFile(filepath.Clean(rawURL))
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("store: open %q: file URL must have no host (file:///abs/dir)", shown)
		}
		if len(q) > 0 {
			return nil, fmt.Errorf("store: open %q: file URLs take no query parameters", shown)
		}
		if !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("store: open %q: file URL needs an absolute path", shown)
		}
		s, err = openFile(filepath.Clean(filepath.FromSlash(u.Path)))
	case "mem":
		if len(q) > 0 {
			return nil, fmt.Errorf("store: open %q: mem URLs take no query parameters", shown)
		}
		s = &bucketStore{bucket: memblob.OpenBucket(nil), mem: true, reqs: new(reqCounter)}
	case "s3":
		s, err = openS3(ctx, u.Host, strings.Trim(u.Path, "/"), q)
	default:
		return nil, fmt.Errorf("store: open %q: unsupported scheme %q (want file, mem or s3)", shown, u.Scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %q: %w", shown, err)
	}
	return s, nil
}

// openS3 builds the S3 client itself (rather than through s3blob's URL
// opener) for two reasons: the SDK's own retryer is disabled, so that every
// conditional write is sent exactly once per Put and an ambiguous outcome
// reaches the caller; and a middleware captures the ETag of the write response
// so Put needs no extra request.
func openS3(ctx context.Context, bucket, prefix string, q url.Values) (Store, error) {
	if bucket == "" {
		return nil, errors.New("s3 URL needs a bucket name as host")
	}
	var s3opts []func(*s3.Options)
	pathStyle := false
	for _, key := range []string{"use_path_style", "s3ForcePathStyle", "disable_https", "accelerate"} {
		v := q.Get(key)
		if v == "" {
			q.Del(key)
			continue
		}
		q.Del(key)
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("invalid value for %q: %w", key, err)
		}
		switch key {
		case "use_path_style", "s3ForcePathStyle":
			s3opts = append(s3opts, func(o *s3.Options) { o.UsePathStyle = b })
			pathStyle = b
		case "disable_https":
			s3opts = append(s3opts, func(o *s3.Options) { o.EndpointOptions.DisableHTTPS = b })
		case "accelerate":
			s3opts = append(s3opts, func(o *s3.Options) { o.UseAccelerate = b })
		}
	}
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	if cfg.Region == "" {
		// S3-compatible servers (MinIO, versitygw, Ceph) sign for
		// us-east-1 unless configured otherwise, and AWS names the region
		// it wants in its answer (SetupError says to set it).
		cfg.Region = "us-east-1"
	}
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	reqs := new(reqCounter)
	cfg.HTTPClient = newHTTPClient(reqs, pathStyle)
	cfg.APIOptions = append(cfg.APIOptions, addETagCapture)
	// The SDK would print "WARN Skipped validation of multipart checksum"
	// to stderr on every read of a multipart object.
	s3opts = append(s3opts, func(o *s3.Options) { o.DisableLogOutputChecksumValidationSkipped = true })
	client := s3.NewFromConfig(cfg, s3opts...)
	b, err := s3blob.OpenBucket(ctx, client, bucket, &s3blob.Options{
		RequestChecksumCalculation: cfg.RequestChecksumCalculation,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 bucket %q: %w", bucket, err)
	}
	if prefix != "" {
		if err := checkKey(prefix); err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("s3 prefix: %w", err)
		}
		b = blob.PrefixedBucket(b, prefix+"/")
		prefix += "/"
	}
	return &bucketStore{bucket: b, s3: client, s3Bucket: bucket, s3Prefix: prefix, reqs: reqs}, nil
}

// checkEndpoint refuses an endpoint parameter that carries credentials: they
// would be sent nowhere useful and printed everywhere the URL is.
func checkEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	if strings.Contains(endpoint, "@") {
		if e, err := url.Parse(endpoint); err != nil || e.User != nil {
			return errors.New("the endpoint parameter must not carry credentials (user:password@); they come from the AWS credential chain (environment, shared config, instance or pod role)")
		}
	}
	e, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("endpoint parameter is not a URL (want http://host:port)")
	}
	if e.Scheme != "http" && e.Scheme != "https" || e.Host == "" {
		return fmt.Errorf("endpoint parameter %q: want http://host[:port] or https://host[:port]", Redact(endpoint))
	}
	return nil
}

// newHTTPClient is the S3 client's HTTP client: the SDK's default transport
// (dial and TLS handshake timeouts, connection pooling) under the deadline
// transport, which bounds every request (DefaultRequestTimeout,
// DefaultIdleTimeout, or the RetryPolicy's values carried by the context),
// over the counting transport, which counts every request sent in reqs.
func newHTTPClient(reqs *reqCounter, pathStyle bool) *http.Client {
	base := awshttp.NewBuildableClient().GetTransport()
	return &http.Client{Transport: &deadlineTransport{
		base: &countingTransport{base: base, c: reqs, pathStyle: pathStyle},
		def:  requestDeadlines{request: DefaultRequestTimeout, idle: DefaultIdleTimeout},
	}}
}
