// Package mailer sends the console's mail (password reset and email
// verification links) through an SMTP server, with
// github.com/wneessen/go-mail. It is plain Go: the gateway fills a Config
// from the Caddyfile's smtp block (docs/caddyfile.md, "smtp").
package mailer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// TLS modes of the connection to the SMTP server.
const (
	// TLSStartTLS: plain TCP, then STARTTLS, which the server must offer
	// (default port 587).
	TLSStartTLS = "starttls"
	// TLSImplicit: TLS from the first byte (default port 465).
	TLSImplicit = "tls"
	// TLSNone: no encryption, for a relay on the same host or network
	// (default port 25). No password is sent in the clear: a username then
	// needs a challenge mechanism (CRAM-MD5, SCRAM).
	TLSNone = "none"
)

// DefaultTimeout bounds one exchange with the SMTP server, from the
// connection to the end of the message.
const DefaultTimeout = 10 * time.Second

// Config is an SMTP server and the sender's address.
type Config struct {
	Host string
	// Port defaults by TLS mode: 587, 465 or 25.
	Port int
	// Username and Password authenticate, when Username is set.
	Username, Password string
	// From is the sender: an address, or a name and an address
	// ("modelgate <no-reply@example.com>").
	From string
	// TLS is TLSStartTLS (the default), TLSImplicit or TLSNone.
	TLS string
	// Timeout bounds one exchange. Default: DefaultTimeout.
	Timeout time.Duration
	// TLSConfig replaces the default TLS settings (the system's roots,
	// Host as the server name): for tests and private authorities.
	TLSConfig *tls.Config
}

// Mailer sends mail through one SMTP server. It is safe for concurrent use:
// each message goes over a connection of its own.
type Mailer struct {
	cfg  Config
	from *mail.Address
}

// New checks cfg and returns a Mailer; nothing is dialled.
func New(cfg Config) (*Mailer, error) {
	if cfg.Host == "" {
		return nil, errors.New("smtp: no host")
	}
	if cfg.TLS == "" {
		cfg.TLS = TLSStartTLS
	}
	switch cfg.TLS {
	case TLSStartTLS, TLSImplicit, TLSNone:
	default:
		return nil, fmt.Errorf("smtp: tls %q: want starttls, tls or none", cfg.TLS)
	}
	if cfg.Port == 0 {
		cfg.Port = map[string]int{TLSStartTLS: gomail.DefaultPortTLS, TLSImplicit: gomail.DefaultPortSSL, TLSNone: gomail.DefaultPort}[cfg.TLS]
	}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, fmt.Errorf("smtp: port %d: want 1 to 65535", cfg.Port)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("smtp: from %q: want an address such as no-reply@example.com or \"modelgate <no-reply@example.com>\"", cfg.From)
	}
	return &Mailer{cfg: cfg, from: from}, nil
}

// client makes a go-mail client for one exchange.
func (m *Mailer) client() (*gomail.Client, error) {
	opts := []gomail.Option{gomail.WithPort(m.cfg.Port), gomail.WithTimeout(m.cfg.Timeout)}
	switch m.cfg.TLS {
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL())
	case TLSNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if m.cfg.TLSConfig != nil {
		opts = append(opts, gomail.WithTLSConfig(m.cfg.TLSConfig))
	}
	if m.cfg.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(m.cfg.Username), gomail.WithPassword(m.cfg.Password))
	}
	return gomail.NewClient(m.cfg.Host, opts...)
}

// Message is one plain-text mail to one recipient.
type Message struct {
	To, Subject, Text string
}

// Send delivers msg to the SMTP server: connect, TLS, authenticate, send,
// quit. An error says which step failed, never with the password.
func (m *Mailer) Send(ctx context.Context, msg Message) error {
	to, err := mail.ParseAddress(msg.To)
	if err != nil {
		return fmt.Errorf("smtp: recipient %q: %w", msg.To, err)
	}
	gm := gomail.NewMsg()
	gm.FromMailAddress(m.from)
	gm.ToMailAddress(to)
	gm.Subject(msg.Subject)
	gm.SetDate()
	gm.SetMessageID()
	gm.SetBodyString(gomail.TypeTextPlain, msg.Text)
	c, err := m.client()
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	if err := c.DialAndSendWithContext(ctx, gm); err != nil {
		return m.failed(err)
	}
	return nil
}

// Check goes through the same exchange as Send up to the message
// (connect, TLS, authenticate) and quits: it answers whether mail can be
// sent now, taking about as long as sending would, without sending any.
func (m *Mailer) Check(ctx context.Context) error {
	c, err := m.client()
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	if err := c.DialWithContext(ctx); err != nil {
		return m.failed(err)
	}
	if err := c.Close(); err != nil {
		return m.failed(err)
	}
	return nil
}

// failed wraps an error of the exchange with the server's address, and
// makes sure it cannot carry the password.
func (m *Mailer) failed(err error) error {
	msg := err.Error()
	if m.cfg.Password != "" {
		msg = strings.ReplaceAll(msg, m.cfg.Password, "xxxxx")
	}
	return fmt.Errorf("smtp %s:%d: %s", m.cfg.Host, m.cfg.Port, msg)
}

// Address is the SMTP server's host:port, for messages.
func (m *Mailer) Address() string { return fmt.Sprintf("%s:%d", m.cfg.Host, m.cfg.Port) }
