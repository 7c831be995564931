package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
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
		return nil, fmt.Errorf("store: open: parse url: %w", err)
	}
	redacted := *u
	redacted.User = nil // never show credentials, not even a user name
	shown := redacted.String()
	if u.User != nil {
		return nil, fmt.Errorf("store: open %q: credentials in the URL are not accepted; use the AWS credential chain", shown)
	}
	q := u.Query()
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
		s = &bucketStore{bucket: memblob.OpenBucket(nil), mem: true}
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
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	cfg.APIOptions = append(cfg.APIOptions, addETagCapture)
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
	}
	return &bucketStore{bucket: b}, nil
}
