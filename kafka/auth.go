package kafka

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The settings Auth reads, from the environment or from an auth file (one
// KEY=value a line, '#' starts a comment, the same names).
const (
	EnvSASLMechanism = "FLOE_KAFKA_SASL_MECHANISM" // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: no SASL
	EnvSASLUsername  = "FLOE_KAFKA_SASL_USERNAME"
	EnvSASLPassword  = "FLOE_KAFKA_SASL_PASSWORD"
	EnvTLS           = "FLOE_KAFKA_TLS"           // true: connect with TLS (implied by any TLS file)
	EnvTLSCAFile     = "FLOE_KAFKA_TLS_CA_FILE"   // PEM roots to trust instead of the system's
	EnvTLSCertFile   = "FLOE_KAFKA_TLS_CERT_FILE" // client certificate (PEM), with the key file
	EnvTLSKeyFile    = "FLOE_KAFKA_TLS_KEY_FILE"
	EnvTLSServerName = "FLOE_KAFKA_TLS_SERVER_NAME" // the name to verify, when not the broker's host
)

var authKeys = []string{EnvSASLMechanism, EnvSASLUsername, EnvSASLPassword, EnvTLS,
	EnvTLSCAFile, EnvTLSCertFile, EnvTLSKeyFile, EnvTLSServerName}

// SASL mechanisms.
const (
	MechPlain       = "PLAIN"
	MechSCRAMSHA256 = "SCRAM-SHA-256"
	MechSCRAMSHA512 = "SCRAM-SHA-512"
)

// Auth is how a client authenticates: TLS and SASL. Its String and
// GoString never print the password.
type Auth struct {
	// Mechanism is the SASL mechanism (MechPlain, MechSCRAMSHA256,
	// MechSCRAMSHA512); empty means no SASL.
	Mechanism string
	Username  string
	password  string

	TLS        bool
	CAFile     string
	CertFile   string
	KeyFile    string
	ServerName string

	// From says where the settings came from ("environment" or the file),
	// for messages.
	From string
}

// String describes the settings without the password.
func (a Auth) String() string {
	var parts []string
	if a.Mechanism != "" {
		parts = append(parts, "sasl="+a.Mechanism, "user="+strconv.Quote(a.Username))
		if a.password != "" {
			parts = append(parts, "password=REDACTED")
		}
	}
	if a.TLS {
		parts = append(parts, "tls=true")
	}
	if len(parts) == 0 {
		return "no authentication"
	}
	return strings.Join(parts, " ")
}

// GoString is String, so %#v does not print the password either.
func (a Auth) GoString() string { return "kafka.Auth{" + a.String() + "}" }

// WithPassword returns a with its SASL password set (tests and Go callers).
func (a Auth) WithPassword(p string) Auth { a.password = p; return a }

// LoadAuth reads the authentication settings: from file when it is not
// empty (then the environment is not read), else from the environment
// through getenv (os.Getenv when nil).
func LoadAuth(file string, getenv func(string) string) (Auth, error) {
	var vals map[string]string
	from := "environment"
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return Auth{}, fmt.Errorf("kafka auth file: %w", err)
		}
		if vals, err = parseAuthFile(file, data); err != nil {
			return Auth{}, err
		}
		from = file
	} else {
		if getenv == nil {
			getenv = os.Getenv
		}
		vals = map[string]string{}
		for _, k := range authKeys {
			if v := getenv(k); v != "" {
				vals[k] = v
			}
		}
	}
	a := Auth{
		Mechanism:  strings.ToUpper(strings.TrimSpace(vals[EnvSASLMechanism])),
		Username:   vals[EnvSASLUsername],
		password:   vals[EnvSASLPassword],
		CAFile:     vals[EnvTLSCAFile],
		CertFile:   vals[EnvTLSCertFile],
		KeyFile:    vals[EnvTLSKeyFile],
		ServerName: vals[EnvTLSServerName],
		From:       from,
	}
	if v := vals[EnvTLS]; v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Auth{}, fmt.Errorf("kafka auth (%s): %s: want true or false, got %q", from, EnvTLS, v)
		}
		a.TLS = b
	}
	if a.CAFile != "" || a.CertFile != "" || a.KeyFile != "" || a.ServerName != "" {
		a.TLS = true
	}
	return a, a.validate()
}

func (a Auth) validate() error {
	switch a.Mechanism {
	case "":
		if a.Username != "" || a.password != "" {
			return fmt.Errorf("kafka auth (%s): a SASL user or password is set but %s is not (want %s, %s or %s)",
				a.From, EnvSASLMechanism, MechPlain, MechSCRAMSHA256, MechSCRAMSHA512)
		}
	case MechPlain, MechSCRAMSHA256, MechSCRAMSHA512:
		if a.Username == "" || a.password == "" {
			return fmt.Errorf("kafka auth (%s): %s %s needs %s and %s", a.From, EnvSASLMechanism, a.Mechanism, EnvSASLUsername, EnvSASLPassword)
		}
	default:
		return fmt.Errorf("kafka auth (%s): %s: unknown mechanism %q (want %s, %s or %s)",
			a.From, EnvSASLMechanism, a.Mechanism, MechPlain, MechSCRAMSHA256, MechSCRAMSHA512)
	}
	if (a.CertFile == "") != (a.KeyFile == "") {
		return fmt.Errorf("kafka auth (%s): %s and %s go together", a.From, EnvTLSCertFile, EnvTLSKeyFile)
	}
	return nil
}

func parseAuthFile(file string, data []byte) (map[string]string, error) {
	known := map[string]bool{}
	for _, k := range authKeys {
		known[k] = true
	}
	vals := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(strings.TrimPrefix(k, "export "))
		if !ok {
			return nil, fmt.Errorf("kafka auth file %s:%d: want KEY=value", file, n)
		}
		if !known[k] {
			return nil, fmt.Errorf("kafka auth file %s:%d: unknown setting %q (want one of %s)", file, n, k, strings.Join(authKeys, ", "))
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		vals[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("kafka auth file %s: %w", file, err)
	}
	return vals, nil
}

// opts returns the client options of a.
func (a Auth) opts() ([]kgo.Opt, error) {
	var out []kgo.Opt
	if a.TLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.ServerName}
		if a.CAFile != "" {
			pem, err := os.ReadFile(a.CAFile)
			if err != nil {
				return nil, fmt.Errorf("kafka tls: %s: %w", EnvTLSCAFile, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("kafka tls: %s %s holds no PEM certificate", EnvTLSCAFile, a.CAFile)
			}
			cfg.RootCAs = pool
		}
		if a.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("kafka tls: client certificate %s: %w", a.CertFile, err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		out = append(out, kgo.DialTLSConfig(cfg))
	}
	var mech sasl.Mechanism
	switch a.Mechanism {
	case MechPlain:
		mech = plain.Auth{User: a.Username, Pass: a.password}.AsMechanism()
	case MechSCRAMSHA256:
		mech = scram.Auth{User: a.Username, Pass: a.password}.AsSha256Mechanism()
	case MechSCRAMSHA512:
		mech = scram.Auth{User: a.Username, Pass: a.password}.AsSha512Mechanism()
	}
	if mech != nil {
		out = append(out, kgo.SASL(mech))
	}
	return out, nil
}

// ClientOpts returns the franz-go options of a's TLS and SASL set-up, for
// callers that build their own kgo client (tests, tools). A TLS file that
// cannot be read yields no TLS option; use Dial to see the error.
func ClientOpts(a Auth) []kgo.Opt {
	o, err := a.opts()
	if err != nil {
		return nil
	}
	return o
}
