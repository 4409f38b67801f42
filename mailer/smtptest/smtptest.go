// Package smtptest runs a real SMTP server (github.com/emersion/go-smtp) on
// loopback that keeps the mail it receives, for tests of what the gateway
// sends: the tests read the links from the mail as a customer would.
package smtptest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Options vary the server.
type Options struct {
	// Username and Password, if set, are required (AUTH PLAIN, over TLS).
	Username, Password string
	// TLS offers STARTTLS, or with Implicit speaks TLS from the first
	// byte, with a certificate for 127.0.0.1 and localhost that Roots
	// trusts.
	TLS, Implicit bool
}

// Mail is one message the server took.
type Mail struct {
	From string
	To   []string
	Raw  []byte // the message as sent (RFC 5322)
}

// Message parses the mail.
func (m Mail) Message() (*mail.Message, error) { return mail.ReadMessage(bytes.NewReader(m.Raw)) }

// Subject is the mail's decoded Subject.
func (m Mail) Subject() string {
	msg, err := m.Message()
	if err != nil {
		return ""
	}
	s, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		return msg.Header.Get("Subject")
	}
	return s
}

// Text is the mail's body, decoded from its transfer encoding.
func (m Mail) Text() string {
	msg, err := m.Message()
	if err != nil {
		return ""
	}
	r := msg.Body
	switch strings.ToLower(msg.Header.Get("Content-Transfer-Encoding")) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, r)
	}
	b, _ := io.ReadAll(r)
	return strings.ReplaceAll(string(b), "\r\n", "\n")
}

// Server is a running SMTP server.
type Server struct {
	srv   *smtp.Server
	ln    net.Listener
	opts  Options
	roots *x509.CertPool

	mu      sync.Mutex
	mails   []Mail
	refuse  bool
	arrived chan struct{}
}

// Start starts a server on 127.0.0.1, stopped when t ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{opts: o, arrived: make(chan struct{}, 1000)}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{s: s}, nil }))
	s.srv.Domain = "localhost"
	s.srv.ReadTimeout, s.srv.WriteTimeout = 10*time.Second, 10*time.Second
	s.srv.MaxMessageBytes = 1 << 20
	s.srv.ErrorLog = discard{}
	if o.TLS {
		cfg, roots, err := certificate()
		if err != nil {
			t.Fatal(err)
		}
		s.srv.TLSConfig, s.roots = cfg, roots
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.TLS && o.Implicit {
		ln = tls.NewListener(ln, s.srv.TLSConfig)
	}
	s.ln = ln
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// Host and Port are where the server listens.
func (s *Server) Host() string { return "127.0.0.1" }

// Port is the server's TCP port.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// PortString is Port as text, for a Caddyfile.
func (s *Server) PortString() string { return strconv.Itoa(s.Port()) }

// Roots trusts the server's certificate (with Options.TLS).
func (s *Server) Roots() *x509.CertPool { return s.roots }

// Stop closes the server: connections to it are refused from now on.
func (s *Server) Stop() {
	_ = s.ln.Close() // refused at once, even before Serve has taken the listener
	_ = s.srv.Close()
}

// Refuse makes the server refuse (or again accept) every message with a
// temporary failure (451) at its first recipient.
func (s *Server) Refuse(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = on
}

// Mails are the messages taken so far.
func (s *Server) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

// Wait returns the messages once there are at least n, or fails t after
// timeout.
func (s *Server) Wait(t testing.TB, n int, timeout time.Duration) []Mail {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if m := s.Mails(); len(m) >= n {
			return m
		}
		select {
		case <-s.arrived:
		case <-deadline:
			t.Fatalf("%d mails arrived in %s, want %d", len(s.Mails()), timeout, n)
		}
	}
}

// session is one SMTP session.
type session struct {
	s      *Server
	authed bool
	from   string
	to     []string
}

func (se *session) AuthMechanisms() []string {
	if se.s.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (se *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != se.s.opts.Username || password != se.s.opts.Password {
			return errors.New("invalid credentials")
		}
		se.authed = true
		return nil
	}), nil
}

func (se *session) Mail(from string, _ *smtp.MailOptions) error {
	if se.s.opts.Username != "" && !se.authed {
		return smtp.ErrAuthRequired
	}
	se.from = from
	return nil
}

func (se *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	se.s.mu.Lock()
	refuse := se.s.refuse
	se.s.mu.Unlock()
	if refuse {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	se.to = append(se.to, to)
	return nil
}

func (se *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	se.s.mu.Lock()
	se.s.mails = append(se.s.mails, Mail{From: se.from, To: se.to, Raw: raw})
	se.s.mu.Unlock()
	select {
	case se.s.arrived <- struct{}{}:
	default:
	}
	return nil
}

func (se *session) Reset()        { se.from, se.to = "", nil }
func (se *session) Logout() error { return nil }

// certificate makes a self-signed certificate for 127.0.0.1 and localhost.
func certificate() (*tls.Config, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "smtptest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, roots, nil
}

// discard drops the server's error log.
type discard struct{}

func (discard) Printf(string, ...any) {}
func (discard) Println(...any)        {}
