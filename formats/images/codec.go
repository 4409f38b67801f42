package images

import (
	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
)

// Codec is the Images format in the codec table: OpenAI's error envelope,
// for the errors of image routes. Their requests and answers are not
// translated, so it has no other direction.
var Codec = formats.Codec{
	ToolIDPrefix: openai.Codec.ToolIDPrefix,
	AppendError:  openai.AppendError,
	ErrorStatus:  (*formats.Error).Status,

	StreamContentType: formats.EventStream,
}

func init() { formats.Register(formats.WireImages, &Codec) }
