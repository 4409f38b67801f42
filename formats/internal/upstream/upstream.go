// Package upstream holds what the vendor packages share to read an upstream's
// answers: the table from an upstream's HTTP error status to the gateway's
// error kinds, the errors of answers the gateway cannot use, and the
// pass-through rewrite of an answer's model member.
package upstream

import (
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// Unusable is the error of an answer the gateway cannot read.
func Unusable() *formats.Error {
	return formats.NewError(formats.KindUpstream, "The upstream provider sent an unusable answer.")
}

// BadEvent is the error of a stream event the gateway cannot read.
func BadEvent() *formats.Error {
	return formats.NewError(formats.KindUpstream, "The upstream provider sent an unusable stream event.")
}

// Object returns a whole (non-streamed) answer without its surrounding
// whitespace; ok is false when it is not a valid JSON object, which no
// vendor's answer can be.
func Object(body []byte) (obj []byte, ok bool) {
	body = rawjson.TrimSpace(body)
	return body, rawjson.Kind(body) == '{' && jsontext.Value(body).IsValid()
}

// Rejected is the error of an upstream's 400 (or 422): the client's request
// was bad, so the upstream's message (redacted by the caller), the field it
// names and its code are kept.
func Rejected(message, param, code string) *formats.Error {
	if message == "" {
		message = "The upstream provider rejected the request as invalid."
	}
	return &formats.Error{Kind: formats.KindInvalidRequest, Message: message, Param: param, Code: code}
}

// Reported is the error an upstream reported with a message of its own
// (redacted by the caller), inside a stream or a 200 answer.
func Reported(kind formats.ErrorKind, message string) *formats.Error {
	return formats.NewError(kind, "The upstream provider reported an error: "+message)
}

// StatusError maps an upstream's HTTP error status, other than 400 and 422
// (whose body each vendor reads its own way, see Rejected), to the
// gateway's error: KnownStatus, else Failed.
func StatusError(status int, message string) *formats.Error {
	if e, ok := KnownStatus(status, message); ok {
		return e
	}
	return Failed(status)
}

// KnownStatus is the table of the upstream statuses whose meaning does not
// depend on the vendor. 401 and 403 (the gateway's credentials) and 404
// (its routing) are the gateway's fault, never the client's: upstream
// failures, never a 401. 408 and 504 are timeouts; 413 a request too large,
// with the upstream's message (redacted by the caller) when it gave one;
// 429, 503 and 529 (Anthropic's overload) overload. ok is false for any
// other status.
func KnownStatus(status int, message string) (e *formats.Error, ok bool) {
	switch status {
	case 401, 403:
		return formats.NewError(formats.KindUpstream, "The upstream provider refused the gateway's credentials (HTTP "+strconv.Itoa(status)+")."), true
	case 404:
		return formats.NewError(formats.KindUpstream, "The upstream provider does not serve the routed model (HTTP 404)."), true
	case 408, 504:
		return formats.NewError(formats.KindTimeout, "The upstream provider timed out."), true
	case 413:
		if message == "" {
			message = "The request is too large for the upstream provider."
		}
		return formats.NewError(formats.KindRequestTooLarge, message), true
	case 429, 503, 529:
		return formats.NewError(formats.KindOverloaded, "The upstream provider is overloaded; retry later."), true
	}
	return nil, false
}

// Failed is the error of an upstream status that KnownStatus does not
// name: a failure of the upstream (5xx), or a refusal of the request that
// the gateway cannot explain (another 4xx).
func Failed(status int) *formats.Error {
	if status >= 500 {
		return formats.NewError(formats.KindUpstream, "The upstream provider failed (HTTP "+strconv.Itoa(status)+").")
	}
	return formats.NewError(formats.KindUpstream, "The upstream provider rejected the request (HTTP "+strconv.Itoa(status)+").")
}

// Model is the member of an answer object that names the model, noted while
// the object is walked, so that a pass-through can put the service model in
// the upstream's place without walking the object again.
type Model struct {
	m     rawjson.Member
	found bool
}

// Found notes the model member.
func (m *Model) Found(member *rawjson.Member) { m.m, m.found = *member, true }

// Edit returns the edit that makes value (raw JSON) the model: the noted
// member's value replaced, else a member name appended after the last
// member of the object that it walked to its end. The appended text is
// built in buf (128 bytes hold a member with a model id, without
// allocating).
func (m *Model) Edit(it *rawjson.Iter, name string, value, buf []byte) rawjson.Edit {
	if m.found {
		return rawjson.Edit{Start: m.m.ValueStart, End: m.m.ValueEnd, Text: value}
	}
	at := it.Last()
	return rawjson.Edit{Start: at, End: at, Text: rawjson.AppendMember(buf, it.Len() > 0, name, value)}
}

// Append appends to dst the object body, which it walked to its end, with
// its model member name set to serviceModel; everything else stays
// byte-identical.
func (m *Model) Append(dst, body []byte, it *rawjson.Iter, name, serviceModel string) []byte {
	var mq [96]byte
	var tb [128]byte
	quoted := rawjson.AppendQuote(mq[:0], serviceModel)
	return rawjson.Apply(dst, body, m.Edit(it, name, quoted, tb[:0]))
}

// PassThrough appends to dst a whole upstream answer for a client of the
// same format: its model member (the first of modelNames that it has; a
// missing one is added as modelNames[0]) set to serviceModel, everything
// else byte-identical. member reads every other member of the answer, in
// order: usable reports a member that makes the answer one the gateway can
// use (its content), and an error the answer carries ends the walk with
// it (the member comes by value: a pointer into the walk would move the
// walk to the heap). An answer that is not a JSON object, or has no usable
// member, is Unusable.
func PassThrough(dst, body []byte, modelNames []string, serviceModel string,
	member func(m rawjson.Member, v []byte) (usable bool, err *formats.Error)) ([]byte, *formats.Error) {
	body, ok := Object(body)
	if !ok {
		return dst, Unusable()
	}
	var model Model
	usable := false
	it := rawjson.Object(body, 0)
	for it.Next() {
		m := it.Member()
		if nameIn(m, modelNames) {
			model.Found(m)
			continue
		}
		ok, err := member(*m, it.Value())
		if err != nil {
			return dst, err
		}
		usable = usable || ok
	}
	if it.Err() != nil || !usable {
		return dst, Unusable()
	}
	return model.Append(dst, body, &it, modelNames[0], serviceModel), nil
}

// ModelMember names the model member of an answer, for PassThrough, in
// every format but Gemini's.
var ModelMember = []string{"model"}

// nameIn reports whether the member's name is one of names.
func nameIn(m *rawjson.Member, names []string) bool {
	for _, n := range names {
		if m.NameIs(n) {
			return true
		}
	}
	return false
}
