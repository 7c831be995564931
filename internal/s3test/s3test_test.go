package s3test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

func TestMain(m *testing.M) { Main(m) }

func TestBucketName(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		name string
		want string
	}{
		{1, "TestX", "floe-1-testx"},
		{12, "TestConformance/Race_IfMatch", "floe-12-testconformance-race-ifmatch"},
		{3, strings.Repeat("A", 100), "floe-3-" + strings.Repeat("a", 56)},
		{4, "Test/", "floe-4-test"},
	} {
		if got := bucketName(tc.n, tc.name); got != tc.want {
			t.Errorf("bucketName(%d, %q) = %q, want %q", tc.n, tc.name, got, tc.want)
		}
	}
}

// TestConditionalWrites checks the server itself, with the plain SDK: the
// harness is only useful if versitygw enforces If-None-Match and If-Match.
func TestConditionalWrites(t *testing.T) {
	s := Shared(t)
	u, err := url.Parse(s.NewBucket(t))
	if err != nil {
		t.Fatal(err)
	}
	bucket := u.Host
	if q := u.Query(); q.Get("endpoint") != s.Endpoint || q.Get("use_path_style") != "true" || q.Get("region") != Region {
		t.Fatalf("URL %s lacks endpoint/use_path_style/region", u)
	}
	ctx := context.Background()
	put := func(body string, in *s3.PutObjectInput) (*s3.PutObjectOutput, error) {
		in.Bucket, in.Key, in.Body = aws.String(bucket), aws.String("k"), strings.NewReader(body)
		return s.client.PutObject(ctx, in)
	}
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return ""
	}
	first, err := put("one", &s3.PutObjectInput{IfNoneMatch: aws.String("*")})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := put("two", &s3.PutObjectInput{IfNoneMatch: aws.String("*")}); code(err) != "PreconditionFailed" {
		t.Fatalf("second If-None-Match create: err = %v, want PreconditionFailed", err)
	}
	second, err := put("three", &s3.PutObjectInput{IfMatch: first.ETag})
	if err != nil {
		t.Fatalf("If-Match with current ETag: %v", err)
	}
	if aws.ToString(second.ETag) == aws.ToString(first.ETag) {
		t.Fatalf("ETag did not change: %s", aws.ToString(first.ETag))
	}
	if _, err := put("four", &s3.PutObjectInput{IfMatch: first.ETag}); code(err) != "PreconditionFailed" {
		t.Fatalf("If-Match with stale ETag: err = %v, want PreconditionFailed", err)
	}
}

func TestStartStop(t *testing.T) {
	s := Start(t)
	s.Stop()
	select {
	case <-s.exited:
	default:
		t.Fatal("server still running after Stop")
	}
	s.Stop() // idempotent
}
