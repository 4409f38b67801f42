package openai

import (
	"bytes"

	"github.com/modelgate/modelgate/formats/rawjson"
)

// textShape remembers a chunk split around its one generated string (a
// content, refusal or reasoning delta, or a tool call's arguments).
// Upstreams send hundreds of chunks that differ from the one before only in
// that string (id, created, model, index, finish_reason: all repeat), and
// the same bytes around a string walk the same way: such a chunk need not
// be walked again: the pass-through meters and splices it with the last
// walk's edits, the decoder makes the last chunk's event of it
// (docs/translation.md, "What a pass-through changes").
type textShape struct {
	head, tail []byte // empty head: nothing remembered
}

// set remembers data split around data[start:end].
func (s *textShape) set(data []byte, start, end int) {
	s.head = append(s.head[:0], data[:start]...)
	s.tail = append(s.tail[:0], data[end:]...)
}

// reset forgets the remembered chunk.
func (s *textShape) reset() { s.head = s.head[:0] }

// match reports whether data is the remembered chunk with another JSON
// string in place of its generated one, and returns that string (quoted).
func (s *textShape) match(data []byte) (text []byte, ok bool) {
	h, t := s.head, s.tail
	if len(h) == 0 || len(data) <= len(h)+len(t) || data[len(h)] != '"' ||
		!bytes.HasPrefix(data, h) || !bytes.HasSuffix(data, t) {
		return nil, false
	}
	end, err := rawjson.SkipValue(data, len(h))
	if err != nil || end != len(data)-len(t) {
		return nil, false
	}
	return data[len(h):end], true
}

// offsetIn returns where sub, sliced from b, starts in b.
func offsetIn(b, sub []byte) (int, bool) {
	off := cap(b) - cap(sub)
	if len(sub) == 0 || off < 0 || off+len(sub) > len(b) || &b[off] != &sub[0] {
		return 0, false
	}
	return off, true
}
