// Package emit holds what the vendor packages share to write their
// formats: the default messages of the error kinds, tool-call arguments as
// a JSON object, the text of a tool result, and the type of an image known
// only by its data.
package emit

import (
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// messages are the default messages of the kinds, in the gateway's own
// words (OpenAI's envelope uses them as they are).
var messages = [...]string{
	formats.KindInvalidRequest:    "The request is invalid.",
	formats.KindAuthentication:    "Incorrect API key provided.",
	formats.KindAccountSuspended:  "This account is suspended.",
	formats.KindInsufficientQuota: "The account's balance is insufficient for this request.",
	formats.KindPermissionDenied:  "This request is not permitted.",
	formats.KindNotFound:          "The requested resource does not exist.",
	formats.KindMethodNotAllowed:  "Method not allowed.",
	formats.KindRequestTooLarge:   "The request is too large.",
	formats.KindRateLimited:       "Rate limit exceeded; retry later.",
	formats.KindUpstream:          "The upstream provider failed.",
	formats.KindOverloaded:        "The upstream provider is overloaded; retry later.",
	formats.KindTimeout:           "The upstream provider timed out.",
}

// Message is the message of e in an envelope: its own, else the envelope's
// default for its kind.
func Message(e *formats.Error, defaultMessage func(formats.ErrorKind) string) string {
	if e.Message != "" {
		return e.Message
	}
	return defaultMessage(e.Kind)
}

// DefaultMessage is the message of an error of kind k that carries none, in
// the gateway's own words; an envelope words some kinds in its vendor's way
// before it asks. internal is the envelope's message for the gateway's own
// failure (KindInternal, and any kind the table does not know).
func DefaultMessage(k formats.ErrorKind, internal string) string {
	if int(k) < len(messages) && messages[k] != "" {
		return messages[k]
	}
	return internal
}

// AppendArgs appends tool-call arguments, which the IR keeps as JSON text
// that may not be valid, as the JSON object a format without argument text
// needs: the arguments compacted when they are an object, {} when they are
// empty, else {"_raw_arguments": <the text>} (docs/translation.md, "Tool
// call ids and arguments").
func AppendArgs[S ~string | ~[]byte](dst []byte, args S) []byte {
	start := len(dst)
	dst = append(dst, args...)
	v := rawjson.TrimSpace(dst[start:])
	switch {
	case len(v) == 0:
		return append(dst[:start], "{}"...)
	case rawjson.Kind(v) == '{' && jsontext.Value(v).IsValid():
		c := jsontext.Value(v)
		if err := c.Compact(); err == nil {
			return append(dst[:start], c...)
		}
	}
	dst = append(dst[:start], `{"_raw_arguments":`...)
	dst = rawjson.AppendQuote(dst, args)
	return append(dst, '}')
}

// ToolResultText writes the text parts of a tool result to b, one line
// each, for a format whose tool results are text only, and appends its
// image, document and audio parts, which must travel apart, to media.
func ToolResultText(b *strings.Builder, res *formats.ToolResult, media []formats.Part) []formats.Part {
	n := 0
	for j := range res.Parts {
		switch q := &res.Parts[j]; q.Type {
		case formats.PartText:
			if n > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(q.Text)
			n++
		case formats.PartImage, formats.PartFile, formats.PartAudio:
			media = append(media, *q)
		}
	}
	return media
}

// SniffImage guesses an image's media type from the first characters of
// its base64 data: PNG, JPEG, GIF or WebP, else "".
func SniffImage(data string) string {
	switch {
	case strings.HasPrefix(data, "iVBORw0KGgo"):
		return "image/png"
	case strings.HasPrefix(data, "/9j/"):
		return "image/jpeg"
	case strings.HasPrefix(data, "R0lGOD"):
		return "image/gif"
	case strings.HasPrefix(data, "UklGR"):
		return "image/webp"
	}
	return ""
}
