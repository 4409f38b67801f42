// Package tokencount counts a request's input tokens on this machine, with
// OpenAI's o200k_base byte-pair encoding (embedded in the binary, so nothing
// is fetched at run time). The gateway uses it to answer count_tokens when
// the routed upstream has no count API of its own; for any other vendor's
// model the figure is an estimate, and the answer says so.
package tokencount

import (
	"sync"

	"github.com/tiktoken-go/tokenizer"
	"github.com/tiktoken-go/tokenizer/codec"

	"github.com/modelgate/modelgate/formats"
)

// Allowances for what the text alone does not show, after OpenAI's
// published accounting for chat models.
const (
	perMessage = 3   // role and separators of every message
	perName    = 1   // a message's participant name
	priming    = 3   // the assistant reply's header
	perTool    = 8   // the wrapping of one tool definition
	perCall    = 4   // the wrapping of one tool call or result
	perImage   = 765 // a 1024×1024 image at high detail; URLs cannot be measured
	perFile    = 1024
	perAudio   = 1024
)

// o200k is the o200k_base encoder, built on first use (its vocabulary takes
// a moment and some memory to load). It is made by its own constructor, not
// tokenizer.Get, so that the binary links this vocabulary only: Get's switch
// links all five, some 30 MB of the executable.
var o200k = sync.OnceValue(func() tokenizer.Codec { return codec.NewO200kBase() })

// Count returns the input tokens of a request: its system prompt, messages,
// tool calls and results, and tool definitions.
func Count(ir *formats.Request) (int64, error) {
	c := counter{enc: o200k()}
	if len(ir.System) > 0 {
		c.n += perMessage
		c.parts(ir.System)
	}
	for i := range ir.Messages {
		m := &ir.Messages[i]
		c.n += perMessage
		if m.Name != "" {
			c.n += perName
			c.text(m.Name)
		}
		c.parts(m.Parts)
	}
	for i := range ir.Tools {
		t := &ir.Tools[i]
		c.n += perTool
		c.text(t.Name)
		c.text(t.Description)
		c.text(string(t.Parameters))
	}
	c.n += priming
	return c.n, c.err
}

type counter struct {
	enc tokenizer.Codec
	n   int64
	err error
}

func (c *counter) text(s string) {
	if s == "" || c.err != nil {
		return
	}
	k, err := c.enc.Count(s)
	if err != nil {
		// invalid UTF-8 is rejected by every parser before this point;
		// count it by bytes rather than fail a count
		c.n += int64(len(s))
		return
	}
	c.n += int64(k)
}

func (c *counter) parts(ps []formats.Part) {
	for i := range ps {
		p := &ps[i]
		switch p.Type {
		case formats.PartText, formats.PartRefusal, formats.PartThinking:
			c.text(p.Text)
		case formats.PartImage:
			c.n += perImage
		case formats.PartFile:
			if p.Media != nil && p.Media.Text != "" {
				c.text(p.Media.Text)
			} else {
				c.n += perFile
			}
		case formats.PartAudio:
			c.n += perAudio
		case formats.PartToolCall:
			c.n += perCall
			c.text(p.ToolCall.Name)
			c.text(p.ToolCall.Arguments)
		case formats.PartToolResult:
			c.n += perCall
			c.parts(p.ToolResult.Parts)
		}
	}
}
