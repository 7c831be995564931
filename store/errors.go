package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"unicode/utf8"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"
)

// reservedPrefix starts every name the file:// backend keeps for itself (temp
// files, lock files). Keys may not contain a segment starting with it.
const reservedPrefix = ".floe-"

// checkKey reports whether key obeys the Store key rules.
func checkKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("key %q is not valid UTF-8", key)
	}
	if strings.ContainsRune(key, 0) {
		return fmt.Errorf("key %q contains a NUL byte", key)
	}
	for _, seg := range strings.Split(key, "/") {
		switch {
		case seg == "":
			return fmt.Errorf("key %q has an empty segment (leading, trailing or double slash)", key)
		case seg == "." || seg == "..":
			return fmt.Errorf("key %q has a %q segment", key, seg)
		case strings.HasPrefix(seg, reservedPrefix):
			return fmt.Errorf("key %q has a segment starting with the reserved %q", key, reservedPrefix)
		}
	}
	return nil
}

func checkPutOptions(opts PutOptions) error {
	if opts.IfNotExist && opts.IfMatch != "" {
		return errors.New("IfNotExist and IfMatch are mutually exclusive")
	}
	return nil
}

// s3Transient lists S3 error codes that mean "try again".
var s3Transient = map[string]bool{
	"ConditionalRequestConflict": true, // 409: a concurrent conditional write is in flight
	"SlowDown":                   true, // 503
	"ServiceUnavailable":         true,
	"InternalError":              true,
	"RequestTimeout":             true,
	"OperationAborted":           true,
}

// SetupError is an S3 request that failed because of how the store is set
// up (the bucket, the region, the endpoint's host name, the credentials):
// no retry can help, so it matches no sentinel (not even ErrNotFound for a
// missing bucket), and its message says what to change.
type SetupError struct {
	Msg string
	Err error
}

func (e *SetupError) Error() string { return e.Msg }
func (e *SetupError) Unwrap() error { return e.Err }

// s3Setup returns the set-up problem err shows for a request to bucket,
// or nil when it shows none.
func s3Setup(bucket string, err error) *SetupError {
	if err == nil {
		return nil
	}
	var se *SetupError
	if errors.As(err, &se) {
		return se
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch code := ae.ErrorCode(); code {
		case "NoSuchBucket":
			return &SetupError{Msg: fmt.Sprintf("bucket %q does not exist (create it, or fix the bucket in the URL)", bucket), Err: err}
		case "AuthorizationHeaderMalformed", "PermanentRedirect", "IllegalLocationConstraintException":
			return &SetupError{Msg: fmt.Sprintf("the server wants another region for bucket %q (%s: %s): set region=NAME in the URL, storage.s3.region in the spec, or AWS_REGION",
				bucket, code, ae.ErrorMessage()), Err: err}
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken":
			return &SetupError{Msg: fmt.Sprintf("the server refused the request to bucket %q (%s: %s): check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the instance or pod role) and their permissions",
				bucket, code, ae.ErrorMessage()), Err: err}
		}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		hint := "check the endpoint parameter"
		if strings.HasPrefix(dns.Name, bucket+".") {
			hint = "the client put the bucket in the host name (virtual-hosted style): for a server other than AWS add use_path_style=true to the URL (or storage.s3.use_path_style: true in the spec)"
		}
		return &SetupError{Msg: fmt.Sprintf("cannot resolve host %q: %s", dns.Name, hint), Err: err}
	}
	if msg := err.Error(); strings.Contains(msg, "failed to refresh cached credentials") || strings.Contains(msg, "failed to retrieve credentials") ||
		strings.Contains(msg, "no EC2 IMDS role found") {
		return &SetupError{Msg: "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (shared config), or run with an instance or pod role", Err: err}
	}
	return nil
}

// classify returns the sentinel err maps to, or nil when none applies.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if s3Setup("", err) != nil {
		return nil // retrying cannot help, and a missing bucket is not a missing key
	}
	for _, s := range []error{ErrNotFound, ErrPrecondition, ErrTransient, ErrCrashed} {
		if errors.Is(err, s) {
			return s
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil // the caller's context: never transient
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		switch {
		case code == "PreconditionFailed":
			return ErrPrecondition
		case code == "NoSuchKey" || code == "NotFound":
			return ErrNotFound
		case s3Transient[code]:
			return ErrTransient
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		switch c := re.HTTPStatusCode(); {
		case c == http.StatusPreconditionFailed:
			return ErrPrecondition
		case c == http.StatusNotFound:
			return ErrNotFound
		case c == http.StatusTooManyRequests, c >= 500:
			return ErrTransient
		}
	}
	if isNetworkTransient(err) {
		return ErrTransient
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return ErrNotFound
	case gcerrors.FailedPrecondition:
		return ErrPrecondition
	case gcerrors.ResourceExhausted:
		return ErrTransient
	}
	return nil
}

// isNetworkTransient reports connection resets, refused connections, broken
// pipes, unexpected EOFs and network timeouts.
func isNetworkTransient(err error) bool {
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

// wrapErr adds the operation and key to err and makes it match the sentinel
// it maps to. It returns nil for a nil err.
func wrapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var tt *transportTimeout
	if errors.As(err, &tt) {
		// The rest of the chain (SDK operation, URL, "context canceled")
		// says nothing more: one line naming the operation, key and bound.
		return &TimeoutError{Op: op, Key: key, Deadline: tt.deadline, Limit: tt.limit}
	}
	s := classify(err)
	if s == nil || errors.Is(err, s) {
		return fmt.Errorf("store: %s %q: %w", op, key, err)
	}
	return fmt.Errorf("store: %s %q: %w: %w", op, key, s, err)
}
