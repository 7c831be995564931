package store

import (
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// redacted replaces every secret Redact removes.
const redacted = "REDACTED"

// secretParamWords mark query parameter names whose values Redact hides
// (compared case-insensitively, as substrings: "X-Amz-Signature",
// "aws_secret_access_key", "sessionToken", "AWSAccessKeyId" all match).
var secretParamWords = []string{"key", "secret", "token", "password", "passwd", "pwd", "signature", "credential", "auth", "sig"}

func isSecretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretParamWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// userinfoRE matches the userinfo of any "scheme://user[:pass]@" in a text
// that does not parse as a URL.
var userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^@\s]*@`)

// Redact returns rawURL safe to print: the userinfo (user name and password)
// is removed from the URL and from every query parameter whose value is
// itself a URL (endpoint=http://user:pass@host), and the value of every query
// parameter whose name looks secret (containing key, secret, token,
// password, signature, credential, auth, sig) is replaced by "REDACTED".
// Query parameters come out sorted by name. A text that does not parse as a
// URL still loses anything that looks like userinfo. Use it for every URL
// floe prints, logs or records.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return userinfoRE.ReplaceAllString(rawURL, "${1}"+redacted+"@")
	}
	u.User = nil
	if u.RawQuery != "" {
		// What does not parse (bad escapes) is left out, not shown.
		q, _ := url.ParseQuery(u.RawQuery)
		u.RawQuery = encodeQuery(redactQuery(q))
	}
	u.Fragment, u.RawFragment = "", ""
	out := u.String()
	if u.Scheme != "" && strings.HasPrefix(strings.ToLower(rawURL), u.Scheme+"://") && !strings.HasPrefix(out, u.Scheme+"://") {
		out = u.Scheme + "://" + strings.TrimPrefix(out, u.Scheme+":") // mem:// keeps its empty authority
	}
	return out
}

func redactQuery(q url.Values) url.Values {
	for k, vs := range q {
		for i, v := range vs {
			switch {
			case isSecretParam(k):
				vs[i] = redacted
			case strings.Contains(v, "@") || strings.Contains(v, "://"):
				vs[i] = redactValue(v)
			}
		}
	}
	return q
}

// redactValue removes the userinfo from a parameter value that is a URL.
func redactValue(v string) string {
	if u, err := url.Parse(v); err == nil && u.Scheme != "" && u.Host != "" {
		if u.User == nil {
			return v
		}
		u.User = nil
		return u.String()
	}
	return userinfoRE.ReplaceAllString(v, "${1}"+redacted+"@")
}

// encodeQuery is url.Values.Encode that leaves "/" and ":" readable.
func encodeQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, v := range q[k] {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(queryEscape(k))
			b.WriteByte('=')
			b.WriteString(queryEscape(v))
		}
	}
	return b.String()
}

func queryEscape(s string) string {
	e := url.QueryEscape(s)
	return strings.NewReplacer("%2F", "/", "%3A", ":", "%40", "@").Replace(e)
}
