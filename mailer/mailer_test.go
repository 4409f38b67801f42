package mailer

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/mailer/smtptest"
)

// TestSend delivers through a real SMTP server on loopback in each TLS
// mode, with and without authentication, and reads the mail back.
func TestSend(t *testing.T) {
	for name, o := range map[string]smtptest.Options{
		"none":          {},
		"starttls":      {TLS: true},
		"starttls auth": {TLS: true, Username: "mailer", Password: "s3cret-pw"},
		"tls auth":      {TLS: true, Implicit: true, Username: "mailer", Password: "s3cret-pw"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := smtptest.Start(t, o)
			cfg := Config{Host: srv.Host(), Port: srv.Port(), From: "modelgate <no-reply@example.com>", TLS: TLSNone,
				Username: o.Username, Password: o.Password, Timeout: 5 * time.Second}
			if o.TLS {
				cfg.TLS = TLSStartTLS
				if o.Implicit {
					cfg.TLS = TLSImplicit
				}
				cfg.TLSConfig = &tls.Config{RootCAs: srv.Roots(), ServerName: srv.Host(), MinVersion: tls.VersionTLS12}
			}
			m, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Check(context.Background()); err != nil {
				t.Fatalf("check: %v", err)
			}
			if n := len(srv.Mails()); n != 0 {
				t.Fatalf("a check sent %d mails", n)
			}
			long := "https://gateway.example.com/console/reset?token=" + strings.Repeat("A", 43)
			if err := m.Send(context.Background(), Message{To: "ada@example.com", Subject: "Reset your password", Text: "Follow " + long + " soon.\n"}); err != nil {
				t.Fatalf("send: %v", err)
			}
			got := srv.Wait(t, 1, 5*time.Second)[0]
			if got.From != "no-reply@example.com" || len(got.To) != 1 || got.To[0] != "ada@example.com" {
				t.Fatalf("envelope %q → %q", got.From, got.To)
			}
			if got.Subject() != "Reset your password" || !strings.Contains(got.Text(), long) {
				t.Fatalf("mail %q:\n%s", got.Subject(), got.Text())
			}
		})
	}
}

// TestSendFails: a server that is down, a wrong password, a server without
// STARTTLS when it is required, a refused recipient: each an error that
// names the server and never the password.
func TestSendFails(t *testing.T) {
	plain := smtptest.Start(t, smtptest.Options{})
	down := smtptest.Start(t, smtptest.Options{})
	down.Stop()
	authed := smtptest.Start(t, smtptest.Options{TLS: true, Username: "mailer", Password: "right-pw"})
	refusing := smtptest.Start(t, smtptest.Options{})
	refusing.Refuse(true)
	tlsTo := func(s *smtptest.Server) *tls.Config {
		return &tls.Config{RootCAs: s.Roots(), ServerName: s.Host(), MinVersion: tls.VersionTLS12}
	}
	for name, tc := range map[string]struct {
		cfg   Config
		check bool // Check fails too
	}{
		"down":               {Config{Host: down.Host(), Port: down.Port(), TLS: TLSNone}, true},
		"no starttls":        {Config{Host: plain.Host(), Port: plain.Port(), TLS: TLSStartTLS}, true},
		"wrong password":     {Config{Host: authed.Host(), Port: authed.Port(), Username: "mailer", Password: "wrong-pw-123", TLSConfig: tlsTo(authed)}, true},
		"recipient refused":  {Config{Host: refusing.Host(), Port: refusing.Port(), TLS: TLSNone}, false},
		"untrusted starttls": {Config{Host: authed.Host(), Port: authed.Port(), Username: "mailer", Password: "right-pw"}, true},
	} {
		t.Run(name, func(t *testing.T) {
			tc.cfg.From, tc.cfg.Timeout = "no-reply@example.com", 3*time.Second
			m, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = m.Send(context.Background(), Message{To: "ada@example.com", Subject: "s", Text: "t"})
			if err == nil {
				t.Fatal("sent")
			}
			if !strings.Contains(err.Error(), m.Address()) || strings.Contains(err.Error(), "wrong-pw-123") || strings.Contains(err.Error(), "right-pw") {
				t.Fatalf("error %q", err)
			}
			if err := m.Check(context.Background()); (err != nil) != tc.check {
				t.Fatalf("check: %v", err)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no host":  {From: "a@example.com"},
		"bad tls":  {Host: "h", From: "a@example.com", TLS: "ssl"},
		"bad port": {Host: "h", From: "a@example.com", Port: 70000},
		"no from":  {Host: "h"},
		"bad from": {Host: "h", From: "not an address"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	m, err := New(Config{Host: "h", From: "a@example.com", TLS: TLSImplicit})
	if err != nil || m.Address() != "h:465" {
		t.Fatalf("default port of tls: %v %v", m, err)
	}
}
