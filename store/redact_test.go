package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/floe-dev/floe/store"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"s3://b/p?endpoint=http://127.0.0.1:9000&region=us-east-1", "s3://b/p?endpoint=http://127.0.0.1:9000&region=us-east-1"},
		{"s3://b/p?endpoint=http://user:PASS@host:9000", "s3://b/p?endpoint=http://host:9000"},
		{"s3://AKIA:PASS@b/p", "s3://b/p"},
		{"s3://b/p?endpoint=http%3A%2F%2Fuser%3APASS%40host", "s3://b/p?endpoint=http://host"},
		{"https://h/o?X-Amz-Signature=PASS&X-Amz-Credential=PASS&X-Amz-Security-Token=PASS&x-id=GetObject",
			"https://h/o?X-Amz-Credential=REDACTED&X-Amz-Security-Token=REDACTED&X-Amz-Signature=REDACTED&x-id=GetObject"},
		{"s3://b?aws_secret_access_key=PASS&password=PASS&apikey=PASS&use_path_style=true",
			"s3://b?apikey=REDACTED&aws_secret_access_key=REDACTED&password=REDACTED&use_path_style=true"},
		{"file:///srv/data", "file:///srv/data"},
		{"/srv/data", "/srv/data"},
		{"mem://", "mem://"},
		// Unparseable: anything that looks like userinfo still goes.
		{"s3://AKIA:PA/SS@b/p", "s3://REDACTED@b/p"},
		{"http://u:PASS@[::1", "http://REDACTED@[::1"},
	} {
		got := store.Redact(tc.in)
		if got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "PASS") {
			t.Errorf("Redact(%q) leaks: %q", tc.in, got)
		}
	}
}

// TestOpenRefusesEndpointCredentials: credentials in the endpoint parameter
// are refused, and the error does not echo them.
func TestOpenRefusesEndpointCredentials(t *testing.T) {
	for _, u := range []string{
		"s3://b/p?endpoint=http://alice:PASS@127.0.0.1:9000",
		"s3://b/p?endpoint=http://alice@127.0.0.1:9000",
		"s3://b/p?endpoint=http%3A%2F%2Falice%3APASS%40127.0.0.1%3A9000&region=us-east-1",
		"s3://b/p?endpoint=http://alice:PA/SS@127.0.0.1:9000",
	} {
		s, err := store.Open(context.Background(), u)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) accepted credentials", u)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "credential chain") || strings.Contains(msg, "PASS") || strings.Contains(msg, "alice") {
			t.Errorf("Open(%q) = %v: want a refusal naming the AWS credential chain, without the secret", u, err)
		}
	}
	if _, err := store.Open(context.Background(), "s3://b/p?endpoint=127.0.0.1:9000"); err == nil || !strings.Contains(err.Error(), "http://host") {
		t.Errorf("endpoint without scheme: %v", err)
	}
}
