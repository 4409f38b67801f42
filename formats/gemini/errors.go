package gemini

import (
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/emit"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// statusOf is the HTTP status and the canonical status name a Gemini client
// gets for each kind (docs/translation.md, "Errors"): Gemini has no 413 (a body
// too large is INVALID_ARGUMENT, 400) and no 502 (an upstream failure is
// INTERNAL, 500).
func statusOf(k formats.ErrorKind) (int, string) {
	switch k {
	case formats.KindInvalidRequest, formats.KindRequestTooLarge:
		return 400, "INVALID_ARGUMENT"
	case formats.KindAuthentication:
		return 401, "UNAUTHENTICATED"
	case formats.KindAccountSuspended, formats.KindInsufficientQuota, formats.KindPermissionDenied:
		return 403, "PERMISSION_DENIED"
	case formats.KindNotFound:
		return 404, "NOT_FOUND"
	case formats.KindMethodNotAllowed:
		return 405, "UNIMPLEMENTED"
	case formats.KindRateLimited:
		return 429, "RESOURCE_EXHAUSTED"
	case formats.KindOverloaded:
		return 503, "UNAVAILABLE"
	case formats.KindTimeout:
		return 504, "DEADLINE_EXCEEDED"
	}
	return 500, "INTERNAL" // internal, upstream
}

// Status is the HTTP status of e for a Gemini client.
func Status(e *formats.Error) int {
	s, _ := statusOf(e.Kind)
	return s
}

// defaultMessage is used when an error carries no message: Google's words
// where it has its own.
func defaultMessage(k formats.ErrorKind) string {
	switch k {
	case formats.KindInvalidRequest:
		return "Request contains an invalid argument."
	case formats.KindAuthentication:
		return "API key not valid. Please pass a valid API key."
	case formats.KindPermissionDenied:
		return "The caller does not have permission."
	case formats.KindNotFound:
		return "The requested resource was not found."
	case formats.KindRequestTooLarge:
		return "Request payload size exceeds the limit."
	case formats.KindRateLimited:
		return "Resource has been exhausted (e.g. check quota)."
	case formats.KindOverloaded:
		return "The model is overloaded. Please try again later."
	}
	return emit.DefaultMessage(k, "An internal error has occurred.")
}

// AppendError appends the Gemini error envelope of e:
// {"error":{"code","message","status"}}, code repeating the HTTP status of
// Status. A named field adds a google.rpc.BadRequest detail, a RetryAfter a
// google.rpc.RetryInfo detail (which the Gemini SDKs and CLI honour).
func AppendError(dst []byte, e *formats.Error) []byte {
	code, status := statusOf(e.Kind)
	msg := emit.Message(e, defaultMessage)
	dst = append(dst, `{"error":{"code":`...)
	dst = rawjson.AppendInt(dst, int64(code))
	dst = append(dst, `,"message":`...)
	dst = rawjson.AppendQuote(dst, msg)
	dst = append(dst, `,"status":`...)
	dst = rawjson.AppendQuote(dst, status)
	if e.Param != "" || e.RetryAfter > 0 {
		dst = append(dst, `,"details":[`...)
		if e.Param != "" {
			dst = append(dst, `{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":`...)
			dst = rawjson.AppendQuote(dst, e.Param)
			dst = append(dst, `,"description":`...)
			dst = rawjson.AppendQuote(dst, msg)
			dst = append(dst, "}]}"...)
		}
		if e.RetryAfter > 0 {
			if e.Param != "" {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"`...)
			dst = rawjson.AppendInt(dst, int64(e.RetryAfter))
			dst = append(dst, `s"}`...)
		}
		dst = append(dst, ']')
	}
	return append(dst, "}}"...)
}

// upstreamError is the content of a Google error envelope.
type upstreamError struct {
	code       int
	message    string
	status     string
	reason     string // google.rpc.ErrorInfo reason
	field      string // first google.rpc.BadRequest field violation
	retryAfter int    // google.rpc.RetryInfo retryDelay, in seconds
}

// parseErrorBody reads {"error":{...}} (or that envelope inside a list, as
// the non-SSE stream sends it).
func parseErrorBody(body []byte) (ue upstreamError, ok bool) {
	body = rawjson.TrimSpace(body)
	if !jsontext.Value(body).IsValid() {
		return ue, false
	}
	if rawjson.Kind(body) == '[' {
		it := rawjson.Array(body, 0)
		if !it.Next() {
			return ue, false
		}
		body = it.Value()
	}
	if rawjson.Kind(body) != '{' {
		return ue, false
	}
	ev := rawjson.Get(body, "error")
	switch rawjson.Kind(ev) {
	case '{':
		return parseErrorObject(ev), true
	case '"':
		ue.message = jsonval.Str(ev)
		return ue, true
	}
	return ue, false
}

func parseErrorObject(ev []byte) (ue upstreamError) {
	it := rawjson.Object(ev, 0)
	for it.Next() {
		v := it.Value()
		switch {
		case it.NameIs("code"):
			ue.code = int(count(v))
		case it.NameIs("message"):
			jsonval.SetStr(&ue.message, v)
		case it.NameIs("status"):
			jsonval.SetStr(&ue.status, v)
		case it.NameIs("details"):
			di := rawjson.Array(v, 0)
			for di.Next() {
				d := di.Value()
				if r := rawjson.Get(d, "reason"); rawjson.Kind(r) == '"' && ue.reason == "" {
					ue.reason = jsonval.Str(r)
				}
				if rd := rawjson.Get(d, "retryDelay"); rawjson.Kind(rd) == '"' {
					ue.retryAfter = parseDelay(jsonval.Str(rd))
				}
				if fv := rawjson.Get(d, "fieldViolations"); rawjson.Kind(fv) == '[' && ue.field == "" {
					fi := rawjson.Array(fv, 0)
					if fi.Next() {
						if f := rawjson.Get(fi.Value(), "field"); rawjson.Kind(f) == '"' {
							ue.field = jsonval.Str(f)
						}
					}
				}
			}
		}
	}
	return ue
}

// parseDelay reads a proto Duration ("30s", "1.5s") as whole seconds,
// rounded up.
func parseDelay(s string) int {
	s, ok := strings.CutSuffix(s, "s")
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f > 86400 {
		return 0
	}
	n := int(f)
	if float64(n) < f {
		n++
	}
	return n
}

// statusCodes maps canonical status names to HTTP statuses, for error
// elements inside a stream whose code is missing.
func statusCode(name string) int {
	switch name {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return 400
	case "UNAUTHENTICATED":
		return 401
	case "PERMISSION_DENIED":
		return 403
	case "NOT_FOUND":
		return 404
	case "RESOURCE_EXHAUSTED":
		return 429
	case "CANCELLED":
		return 499
	case "UNAVAILABLE":
		return 503
	case "DEADLINE_EXCEEDED":
		return 504
	}
	return 500
}

// ParseUpstreamError reads a Gemini upstream's error answer and maps it to
// the gateway's kinds (docs/translation.md, "Errors"). A 400 keeps Google's
// message (redacted: no keys, project or request ids) and field, since the
// client's request was bad, except when it is about the gateway's own key
// (API_KEY_INVALID) or account (FAILED_PRECONDITION: billing, location),
// which are upstream failures. Other statuses follow the table shared by
// every vendor (upstream.KnownStatus): 401/403/404 are the gateway's fault
// (credentials, routing), KindUpstream, never 401; 408/504 are timeouts,
// 413 too large, 429/503 overload (with Google's retryDelay), other 5xx
// upstream failures.
func ParseUpstreamError(status int, body []byte) *formats.Error {
	ue, _ := parseErrorBody(body)
	return upstreamErr(status, ue)
}

func upstreamErr(status int, ue upstreamError) *formats.Error {
	inStream := status < 400
	if inStream {
		status = ue.code
		if status == 0 {
			status = statusCode(ue.status)
		}
	}
	switch {
	case status == 400 && (ue.reason == "API_KEY_INVALID" || strings.Contains(ue.message, "API key not valid")):
		return formats.NewError(formats.KindUpstream, "The upstream provider refused the gateway's credentials (HTTP 400).")
	case status == 400 && ue.status == "FAILED_PRECONDITION":
		return formats.NewError(formats.KindUpstream, "The upstream provider cannot serve the gateway's account (HTTP 400 FAILED_PRECONDITION).")
	case status == 400 || status == 422:
		return upstream.Rejected(redact(ue.message), ue.field, "")
	}
	// 529 is Anthropic's overload status, which Google never sends: a
	// Gemini upstream's 529 is read as any other failure.
	if e, ok := upstream.KnownStatus(status, redact(ue.message)); ok && status != 529 {
		if e.Kind == formats.KindOverloaded {
			e.RetryAfter = ue.retryAfter
		}
		return e
	}
	if inStream && ue.message != "" {
		return upstream.Reported(formats.KindUpstream, redact(ue.message))
	}
	return upstream.Failed(status)
}

// errorValue reads the error member of an element or a body: an object,
// or a bare message.
func errorValue(v []byte) upstreamError {
	if rawjson.Kind(v) == '{' {
		return parseErrorObject(v)
	}
	return upstreamError{message: jsonval.Str(v)}
}

// redact removes keys and upstream ids from a message the client will see
// (openai.Redact), and Google project numbers and names: runs of ten or
// more digits, and the segment after "projects/".
func redact(s string) string {
	s = formats.Redact(s)
	var b []byte
	last := 0
	for i := 0; i < len(s); {
		switch {
		case s[i] >= '0' && s[i] <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j-i >= 10 {
				b = append(append(b, s[last:i]...), "[redacted]"...)
				last = j
			}
			i = j
		case strings.HasPrefix(s[i:], "projects/"):
			j := i + len("projects/")
			k := j
			for k < len(s) && s[k] != '/' && s[k] != ' ' && s[k] != '\'' && s[k] != '"' && s[k] != ',' {
				k++
			}
			b = append(append(b, s[last:j]...), "[redacted]"...)
			last, i = k, k
		default:
			i++
		}
	}
	if b == nil {
		return s
	}
	return string(append(b, s[last:]...))
}

// ParseCountTokensResponse reads an upstream countTokens answer
// ({"totalTokens":N}; proto3 JSON omits a zero count).
func ParseCountTokensResponse(body []byte) (int64, *formats.Error) {
	body, ok := upstream.Object(body)
	if !ok {
		return 0, upstream.Unusable()
	}
	var total int64
	it := rawjson.Object(body, 0)
	for it.Next() {
		switch {
		case it.NameIs("totalTokens"), it.NameIs("total_tokens"):
			total = count(it.Value())
		case it.NameIs("error"):
			if v := it.Value(); !rawjson.IsNull(v) {
				ue, _ := parseErrorBody(body)
				return 0, upstreamErr(0, ue)
			}
		}
	}
	return total, nil
}

// AppendCountTokensResponse appends a countTokens answer, {"totalTokens":N}.
func AppendCountTokensResponse(dst []byte, totalTokens int64) []byte {
	dst = append(dst, `{"totalTokens":`...)
	dst = rawjson.AppendInt(dst, totalTokens)
	return append(dst, '}')
}
