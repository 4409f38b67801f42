package openai

import (
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/emit"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// errorTypeCode is the OpenAI type and default code of each kind
// (docs/translation.md, "Errors").
func errorTypeCode(k formats.ErrorKind) (typ, code string) {
	switch k {
	case formats.KindInvalidRequest:
		return "invalid_request_error", ""
	case formats.KindAuthentication:
		return "invalid_request_error", "invalid_api_key"
	case formats.KindAccountSuspended:
		return "invalid_request_error", "account_suspended"
	case formats.KindInsufficientQuota:
		return "insufficient_quota", "insufficient_quota"
	case formats.KindPermissionDenied:
		return "permission_error", ""
	case formats.KindNotFound:
		return "invalid_request_error", "model_not_found"
	case formats.KindMethodNotAllowed:
		return "invalid_request_error", "method_not_allowed"
	case formats.KindRequestTooLarge:
		return "invalid_request_error", "request_too_large"
	case formats.KindRateLimited:
		return "requests", "rate_limit_exceeded"
	case formats.KindTimeout:
		return "server_error", "timeout"
	}
	return "server_error", "" // internal, upstream, overloaded
}

// defaultMessage is used when an error carries no message.
func defaultMessage(k formats.ErrorKind) string {
	return emit.DefaultMessage(k, "The gateway failed to process the request.")
}

// AppendError appends the OpenAI error envelope of e:
// {"error":{"message","type","param","code"}}, all four keys present, param
// and code null when empty. e.Code overrides the kind's default code.
func AppendError(dst []byte, e *formats.Error) []byte {
	typ, code := errorTypeCode(e.Kind)
	if e.Code != "" {
		code = e.Code
	}
	msg := emit.Message(e, defaultMessage)
	dst = append(dst, `{"error":{"message":`...)
	dst = rawjson.AppendQuote(dst, msg)
	dst = append(dst, `,"type":`...)
	dst = rawjson.AppendQuote(dst, typ)
	dst = append(dst, `,"param":`...)
	dst = appendNullable(dst, e.Param)
	dst = append(dst, `,"code":`...)
	dst = appendNullable(dst, code)
	return append(dst, "}}"...)
}

func appendNullable(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return rawjson.AppendQuote(dst, s)
}

// upstreamError is the content of an upstream error envelope.
type upstreamError struct {
	message, typ, param, code string
}

// parseErrorBody reads {"error":{...}}, {"error":"text"} or {"message":...}.
func parseErrorBody(body []byte) (ue upstreamError, ok bool) {
	body, ok = upstream.Object(body)
	if !ok {
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
	if m := rawjson.Get(body, "message"); rawjson.Kind(m) == '"' {
		ue.message = jsonval.Str(m)
		if t := rawjson.Get(body, "type"); rawjson.Kind(t) == '"' {
			ue.typ = jsonval.Str(t)
		}
		return ue, true
	}
	return ue, false
}

func parseErrorObject(ev []byte) (ue upstreamError) {
	it := rawjson.Object(ev, 0)
	for it.Next() {
		v := it.Value()
		switch {
		case it.NameIs("message"):
			jsonval.SetStr(&ue.message, v)
		case it.NameIs("type"):
			jsonval.SetStr(&ue.typ, v)
		case it.NameIs("param"):
			jsonval.SetStr(&ue.param, v)
		case it.NameIs("code"):
			switch rawjson.Kind(v) {
			case '"':
				ue.code = jsonval.Str(v)
			case '0':
				ue.code = string(v)
			}
		}
	}
	return ue
}

// ParseUpstreamError reads an upstream OpenAI error answer and maps it to the
// gateway's kinds (docs/translation.md, "Errors"). A 400 (or 422) keeps the
// upstream's message, param and code: the client's request was bad (for
// example context_length_exceeded). Other statuses follow the table shared
// by every vendor (upstream.StatusError): 401/403/404 are the gateway's own
// fault and become 502, never 401; 408/504 are timeouts, 413 too large,
// 429/503/529 overload, other 5xx upstream failures. Keys, organisation,
// project and request ids are redacted from any message that is kept.
func ParseUpstreamError(status int, body []byte) *formats.Error {
	ue, _ := parseErrorBody(body)
	switch {
	case status == 400 || status == 422:
		return upstream.Rejected(formats.Redact(ue.message), ue.param, safeCode(ue.code))
	case status >= 400:
		return upstream.StatusError(status, formats.Redact(ue.message))
	}
	return streamError(ue)
}

// errorValue reads the error member of a chunk or a body: an object, or a
// bare message.
func errorValue(v []byte) upstreamError {
	if rawjson.Kind(v) == '{' {
		return parseErrorObject(v)
	}
	return upstreamError{message: jsonval.Str(v)}
}

// streamError maps an error reported inside a 200 answer (a stream event or
// a body) by its type.
func streamError(ue upstreamError) *formats.Error {
	msg := formats.Redact(ue.message)
	kind := formats.KindUpstream
	switch t := ue.typ + " " + ue.code; {
	case strings.Contains(t, "invalid_request"):
		kind = formats.KindInvalidRequest
	case strings.Contains(t, "timeout"):
		kind = formats.KindTimeout
	case strings.Contains(t, "rate_limit"), strings.Contains(t, "overloaded"), strings.Contains(t, "tokens"), strings.Contains(t, "requests"):
		kind = formats.KindOverloaded
	}
	switch {
	case kind == formats.KindInvalidRequest:
		return upstream.Rejected(msg, ue.param, safeCode(ue.code))
	case msg == "":
		return formats.NewError(kind, defaultMessage(kind))
	}
	return upstream.Reported(kind, msg)
}

// safeCode keeps a short identifier-like code and drops anything else.
func safeCode(c string) string {
	if len(c) > 64 {
		return ""
	}
	for i := 0; i < len(c); i++ {
		ch := c[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-' || ch == '.') {
			return ""
		}
	}
	return c
}
