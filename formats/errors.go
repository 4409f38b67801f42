package formats

import "strconv"

// ErrorKind is the gateway's own classification of a failure. Every vendor
// package renders a kind in its error envelope (docs/translation.md, "Errors").
type ErrorKind uint8

// The error kinds, in the order of docs/translation.md, "Errors".
const (
	KindInvalidRequest    ErrorKind = iota // 400: malformed body, wrong type, out of range, unmappable
	KindAuthentication                     // 401: key missing, malformed, unknown or deleted
	KindAccountSuspended                   // 403: the account is suspended
	KindInsufficientQuota                  // 403: balance zero or below the request's hold
	KindPermissionDenied                   // 403: any other refusal (region)
	KindNotFound                           // 404: unknown model or route
	KindMethodNotAllowed                   // 405: known route, wrong method
	KindRequestTooLarge                    // 413: body over the limit
	KindRateLimited                        // 429: account RPM or concurrency
	KindInternal                           // 500: the gateway's own failure
	KindUpstream                           // 502: upstream error or unusable answer
	KindOverloaded                         // 503: every upstream overloaded or unavailable
	KindTimeout                            // 504: the upstream timed out
)

// kindStatus is the HTTP status of each kind.
var kindStatus = [...]int{
	KindInvalidRequest:    400,
	KindAuthentication:    401,
	KindAccountSuspended:  403,
	KindInsufficientQuota: 403,
	KindPermissionDenied:  403,
	KindNotFound:          404,
	KindMethodNotAllowed:  405,
	KindRequestTooLarge:   413,
	KindRateLimited:       429,
	KindInternal:          500,
	KindUpstream:          502,
	KindOverloaded:        503,
	KindTimeout:           504,
}

// Status is the HTTP status code of the kind.
func (k ErrorKind) Status() int {
	if int(k) < len(kindStatus) {
		return kindStatus[k]
	}
	return 500
}

// Error is a failure to report to the client, in whatever format it speaks.
// Messages must never contain a key, an upstream URL with credentials, or an
// upstream account id.
type Error struct {
	Kind    ErrorKind
	Message string
	// Param names the offending request field (OpenAI's "param"), if any.
	Param string
	// Code overrides the format's default code for the kind (OpenAI's "code").
	Code string
	// RetryAfter, in seconds, is sent as Retry-After when positive.
	RetryAfter int
	// RequestID is the gateway's id of the request, for the envelopes that
	// carry one (Anthropic's "request_id"); empty to omit it.
	RequestID string
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Param != "" {
		return e.Message + " (param " + strconv.Quote(e.Param) + ")"
	}
	return e.Message
}

// Status is the HTTP status code to send.
func (e *Error) Status() int { return e.Kind.Status() }

// Errorf-free constructors keep call sites short and allocation-light.

// InvalidRequest reports a 400 naming the offending field.
func InvalidRequest(param, message string) *Error {
	return &Error{Kind: KindInvalidRequest, Param: param, Message: message}
}

// NewError reports an error of the given kind.
func NewError(kind ErrorKind, message string) *Error {
	return &Error{Kind: kind, Message: message}
}
