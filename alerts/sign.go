package alerts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The webhook's headers.
const (
	// HeaderSignature carries "t=<unix seconds>,v1=<hex HMAC-SHA256>".
	HeaderSignature = "Modelgate-Signature"
	// HeaderWebhookID is the delivery's id, the same on every retry of
	// it, for a receiver to drop duplicates.
	HeaderWebhookID = "Modelgate-Webhook-Id"
	// UserAgent is the webhooks' User-Agent.
	UserAgent = "modelgate-webhooks/1"
)

// DefaultTolerance is how far from now a receiver should accept a
// signature's time.
const DefaultTolerance = 5 * time.Minute

// mac is the lower-case hex HMAC-SHA256 under secret of "<t>.<body>".
func mac(secret string, t int64, body []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(strconv.FormatInt(t, 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Sign is the Modelgate-Signature header of body sent at t under secret:
// "t=<unix seconds>,v1=<lower-case hex of HMAC-SHA256(secret, "<t>.<body>")>".
func Sign(secret string, t time.Time, body []byte) string {
	ts := t.Unix()
	return "t=" + strconv.FormatInt(ts, 10) + ",v1=" + mac(secret, ts, body)
}

// Errors of Verify.
var (
	ErrMalformedSignature = errors.New("alerts: the signature header is not t=<unix seconds>,v1=<hex>")
	ErrSignatureMismatch  = errors.New("alerts: no v1 signature matches the body under the secret")
	ErrSignatureTooOld    = errors.New("alerts: the signature's time is too far from now")
)

// Verify checks a Modelgate-Signature header against the raw body under
// secret: one of its v1 values must match (a header may carry several),
// and its t must be within tolerance of now (DefaultTolerance when
// tolerance is zero or less).
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	var ts int64
	var sigs []string
	haveT := false
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrMalformedSignature
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || haveT {
				return ErrMalformedSignature
			}
			ts, haveT = n, true
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if !haveT || len(sigs) == 0 {
		return ErrMalformedSignature
	}
	want := mac(secret, ts, body)
	match := false
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			match = true
		}
	}
	if !match {
		return ErrSignatureMismatch
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return ErrSignatureTooOld
	}
	return nil
}
