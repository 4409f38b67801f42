package anthropic

import (
	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/emit"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// errorType is Anthropic's error.type for each kind (docs/translation.md,
// "Errors").
func errorType(k formats.ErrorKind) string {
	switch k {
	case formats.KindInvalidRequest, formats.KindMethodNotAllowed:
		return "invalid_request_error"
	case formats.KindAuthentication:
		return "authentication_error"
	case formats.KindAccountSuspended, formats.KindPermissionDenied:
		return "permission_error"
	case formats.KindInsufficientQuota:
		return "billing_error"
	case formats.KindNotFound:
		return "not_found_error"
	case formats.KindRequestTooLarge:
		return "request_too_large"
	case formats.KindRateLimited:
		return "rate_limit_error"
	case formats.KindOverloaded:
		return "overloaded_error"
	case formats.KindTimeout:
		return "timeout_error"
	}
	return "api_error" // internal, upstream
}

// defaultMessage is used when an error carries no message: Anthropic's
// words where the gateway's would surprise an Anthropic client.
func defaultMessage(k formats.ErrorKind) string {
	switch k {
	case formats.KindAuthentication:
		return "invalid x-api-key"
	case formats.KindRequestTooLarge:
		return "Request exceeds the maximum allowed number of bytes."
	case formats.KindOverloaded:
		return "Overloaded"
	}
	return emit.DefaultMessage(k, "Internal server error")
}

// AppendError appends Anthropic's error envelope of e:
// {"type":"error","error":{"type":…,"message":…},"request_id":…}, the
// request id only when e has one.
func AppendError(dst []byte, e *formats.Error) []byte {
	msg := emit.Message(e, defaultMessage)
	dst = append(dst, `{"type":"error","error":{"type":`...)
	dst = rawjson.AppendQuote(dst, errorType(e.Kind))
	dst = append(dst, `,"message":`...)
	dst = rawjson.AppendQuote(dst, msg)
	dst = append(dst, '}')
	if e.RequestID != "" {
		dst = append(dst, `,"request_id":`...)
		dst = rawjson.AppendQuote(dst, e.RequestID)
	}
	return append(dst, '}')
}

// Status is the HTTP status of e for an Anthropic client: 529 when every
// upstream is overloaded (Anthropic's own code, which the SDKs retry),
// otherwise the kind's status.
func Status(e *formats.Error) int {
	if e.Kind == formats.KindOverloaded {
		return 529
	}
	return e.Status()
}

// upstreamError is the content of an Anthropic error envelope.
type upstreamError struct {
	typ, message string
}

// parseErrorBody reads {"type":"error","error":{"type","message"}} (or a
// bare {"error":{...}} / {"message":...}).
func parseErrorBody(body []byte) (ue upstreamError, ok bool) {
	body, ok = upstream.Object(body)
	if !ok {
		return ue, false
	}
	if ev := rawjson.Get(body, "error"); rawjson.Kind(ev) == '{' {
		return parseErrorObject(ev), true
	}
	if m := rawjson.Get(body, "message"); rawjson.Kind(m) == '"' {
		return upstreamError{message: jsonval.Str(m)}, true
	}
	return ue, false
}

func parseErrorObject(ev []byte) (ue upstreamError) {
	it := rawjson.Object(ev, 0)
	for it.Next() {
		v := it.Value()
		switch {
		case it.NameIs("type"):
			jsonval.SetStr(&ue.typ, v)
		case it.NameIs("message"):
			jsonval.SetStr(&ue.message, v)
		}
	}
	return ue
}

// ParseUpstreamError reads an error answer of api.anthropic.com and maps it
// to the gateway's kinds (docs/translation.md, "Errors"). A 400 keeps the
// upstream's message (redacted) and takes Param from its leading field
// path: the client's request was bad. 402 (the gateway's billing at
// Anthropic) is an upstream failure; other statuses follow the table shared
// by every vendor (upstream.StatusError): 401/403/404 are the gateway's own
// fault and become 502, never 401; 413 is too large, 429/503/529 overload,
// 408/504 timeouts, other 5xx upstream failures. Keys and request ids are
// redacted from any message that is kept.
func ParseUpstreamError(status int, body []byte) *formats.Error {
	ue, _ := parseErrorBody(body)
	switch {
	case status == 400 || status == 422:
		msg, param := redactKeepPath(ue.message)
		return upstream.Rejected(msg, param, "")
	case status == 402:
		return formats.NewError(formats.KindUpstream, "The upstream provider refused the gateway's account (HTTP 402).")
	case status >= 400:
		return upstream.StatusError(status, formats.Redact(ue.message))
	}
	return streamError(ue)
}

// redactKeepPath redacts an upstream message but its leading field path
// (which the redaction would take for an id), and returns that path.
func redactKeepPath(msg string) (string, string) {
	p := leadingPath(msg)
	if p == "" {
		return formats.Redact(msg), ""
	}
	return p + ": " + formats.Redact(msg[len(p)+2:]), p
}

// leadingPath is the field path that starts an Anthropic message
// ("messages.0.content: Field required"), or "".
func leadingPath(msg string) string {
	for i := 0; i < len(msg) && i < 128; i++ {
		c := msg[i]
		if c == ':' {
			if i > 0 && i+1 < len(msg) && msg[i+1] == ' ' {
				return msg[:i]
			}
			return ""
		}
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return ""
		}
	}
	return ""
}

// streamError maps an error Anthropic reported inside a 200 answer (an
// error event, or a body of type error) by its type.
func streamError(ue upstreamError) *formats.Error {
	msg, param := redactKeepPath(ue.message)
	kind := formats.KindUpstream
	switch ue.typ {
	case "invalid_request_error":
		kind = formats.KindInvalidRequest
	case "request_too_large":
		kind = formats.KindRequestTooLarge
	case "overloaded_error", "rate_limit_error":
		kind = formats.KindOverloaded
	case "timeout_error":
		kind = formats.KindTimeout
	}
	switch {
	case kind == formats.KindInvalidRequest || kind == formats.KindRequestTooLarge || kind == formats.KindOverloaded:
		if msg == "" {
			msg = defaultMessage(kind)
		}
		e := formats.NewError(kind, msg)
		if kind == formats.KindInvalidRequest {
			e.Param = param
		}
		return e
	case msg == "":
		return formats.NewError(kind, defaultMessage(kind))
	}
	return upstream.Reported(kind, msg)
}
