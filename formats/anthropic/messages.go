package anthropic

import (
	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/rawjson"
)

type role uint8

const (
	roleUser role = iota
	roleAssistant
	roleSystem // Claude Code's role "system" messages (not in Anthropic's API)
)

// blockKind is a content block type.
type blockKind uint8

const (
	blockOther blockKind = iota // an Anthropic-only block (server tools, compaction…)
	blockText
	blockImage
	blockDocument
	blockSearchResult
	blockToolUse
	blockToolResult
	blockThinking
	blockRedactedThinking
)

// blockTypes are the block types Anthropic accepts in requests
// (anthropic-sdk-go BetaContentBlockParamUnion, and mid_conv_system): the
// ones the IR carries, then the Anthropic-only ones, which pass through
// and are dropped when translating. Keep the list in one place.
var blockTypes = [...]struct {
	name string
	kind blockKind
}{
	{"text", blockText},
	{"image", blockImage},
	{"document", blockDocument},
	{"search_result", blockSearchResult},
	{"thinking", blockThinking},
	{"redacted_thinking", blockRedactedThinking},
	{"tool_use", blockToolUse},
	{"tool_result", blockToolResult},
	{"server_tool_use", blockOther},
	{"web_search_tool_result", blockOther},
	{"web_fetch_tool_result", blockOther},
	{"advisor_tool_result", blockOther},
	{"code_execution_tool_result", blockOther},
	{"bash_code_execution_tool_result", blockOther},
	{"text_editor_code_execution_tool_result", blockOther},
	{"tool_search_tool_result", blockOther},
	{"mcp_tool_use", blockOther},
	{"mcp_tool_result", blockOther},
	{"container_upload", blockOther},
	{"compaction", blockOther},
	{"tool_addition", blockOther},
	{"tool_removal", blockOther},
	{"mcp_tool_listing", blockOther},
	{"fallback", blockOther},
	{"mid_conv_system", blockOther},
}

// blockType looks a raw type string up; ok is false for an unknown type.
func blockType(v []byte) (blockKind, bool) {
	if len(v) < 2 {
		return 0, false
	}
	name := v[1 : len(v)-1]
	for i := range blockTypes {
		if string(name) == blockTypes[i].name {
			return blockTypes[i].kind, true
		}
	}
	if s, ok := rawjson.Unquote(v); ok && s != string(name) { // escaped
		for i := range blockTypes {
			if s == blockTypes[i].name {
				return blockTypes[i].kind, true
			}
		}
	}
	return 0, false
}

func blockTypeNames() []string {
	names := make([]string, len(blockTypes))
	for i := range blockTypes {
		names[i] = blockTypes[i].name
	}
	return names
}

// messages walks the messages member of the top-level iterator in place
// and reports how many messages it holds.
func (w *walker) messages(top *rawjson.Iter) (int, *formats.Error) {
	it, err := w.Objects(top, "messages")
	if err != nil {
		return 0, err
	}
	for w.NextObject(&it) {
		end, err := w.message(it.Bytes(), it.Start())
		if err != nil {
			return 0, err
		}
		it.SetEnd(end)
	}
	if err := w.ObjectsErr(&it); err != nil {
		return 0, err
	}
	n, ok := w.EndObjects(top, &it)
	if !ok {
		return 0, invalid("", "The request body is not valid JSON")
	}
	return n, nil
}

// message validates the message object at b[start] (the path ends with its
// index) and returns the offset just past it.
func (w *walker) message(b []byte, start int) (int, *formats.Error) {
	var roleV, content []byte
	it := rawjson.Object(b, start)
	for it.Next() {
		switch m := it.Member(); {
		case m.NameIs("role"):
			roleV = it.Value()
		case m.NameIs("content"):
			content = it.Value()
		}
	}
	end := it.End() + 1
	if err := w.ReqString("role", roleV); err != nil {
		return end, err
	}
	var r role
	switch {
	case rawjson.StringIs(roleV, "user"):
		r = roleUser
	case rawjson.StringIs(roleV, "assistant"):
		r = roleAssistant
	case rawjson.StringIs(roleV, "system"):
		r = roleSystem
	default:
		return end, w.errEnum("role", "user", "assistant")
	}
	w.req.size.Messages++

	if content == nil {
		return end, w.errMissing("content")
	}
	var mb *msgBuilder
	if w.ir != nil {
		mb = &msgBuilder{role: r}
	}
	w.Push("content")
	defer w.Pop()
	switch rawjson.Kind(content) {
	case '"':
		w.req.size.TextBytes += int64(len(content) - 2)
		if mb != nil {
			mb.add(w, formats.Part{Type: formats.PartText, Text: jsonval.Str(content)})
		}
	case '[':
		ci := rawjson.Array(content, 0)
		for ci.Next() {
			w.PushIndex(ci.Len() - 1)
			if err := w.block(ci.Value(), r, mb); err != nil {
				return end, err
			}
			w.Pop()
		}
	default:
		return end, w.errType("", tList)
	}
	if mb != nil {
		mb.flush(w)
	}
	return end, nil
}

// msgBuilder collects one source message's parts into IR messages: a user
// message's tool_result blocks become RoleTool messages, the rest RoleUser
// ones, in order; system-role messages go to Request.System while no turn
// was seen, else become RoleSystem messages.
type msgBuilder struct {
	role role
	cur  *formats.Message
}

// add appends a part (the walker is a parameter, not a field, so that a
// walk without the IR keeps its walker on the stack).
func (mb *msgBuilder) add(w *walker, p formats.Part) {
	ir := w.ir
	var r formats.Role
	switch mb.role {
	case roleSystem:
		if !w.sawTurn {
			ir.System = append(ir.System, p)
			return
		}
		r = formats.RoleSystem
	case roleAssistant:
		r = formats.RoleAssistant
	default:
		r = formats.RoleUser
		if p.Type == formats.PartToolResult {
			r = formats.RoleTool
		}
	}
	if mb.cur == nil || mb.cur.Role != r {
		mb.flush(w)
		mb.cur = &formats.Message{Role: r}
	}
	mb.cur.Parts = append(mb.cur.Parts, p)
}

// flush appends the message in progress to the IR.
func (mb *msgBuilder) flush(w *walker) {
	if mb.cur == nil {
		return
	}
	if mb.cur.Role != formats.RoleSystem {
		w.sawTurn = true
	}
	w.ir.Messages = append(w.ir.Messages, *mb.cur)
	mb.cur = nil
}

// blockFields are the members of a content block the walker reads.
type blockFields struct {
	typ, text, source, id, name, input, toolUseID, content, isError []byte
	thinking, signature, data, title, context, citations            []byte
	cacheControl                                                    []byte
}

func readBlock(v []byte) (f blockFields) {
	it := rawjson.Object(v, 0)
	for it.Next() {
		val := it.Value()
		switch m := it.Member(); {
		case m.NameIs("type"):
			f.typ = val
		case m.NameIs("text"):
			f.text = val
		case m.NameIs("source"):
			f.source = val
		case m.NameIs("id"):
			f.id = val
		case m.NameIs("name"):
			f.name = val
		case m.NameIs("input"):
			f.input = val
		case m.NameIs("tool_use_id"):
			f.toolUseID = val
		case m.NameIs("content"):
			f.content = val
		case m.NameIs("is_error"):
			f.isError = val
		case m.NameIs("thinking"):
			f.thinking = val
		case m.NameIs("signature"):
			f.signature = val
		case m.NameIs("data"):
			f.data = val
		case m.NameIs("title"):
			f.title = val
		case m.NameIs("context"):
			f.context = val
		case m.NameIs("citations"):
			f.citations = val
		case m.NameIs("cache_control"):
			f.cacheControl = val
		}
	}
	return f
}

// block validates one content block of a message (the path ends with its
// index).
func (w *walker) block(v []byte, r role, mb *msgBuilder) *formats.Error {
	if rawjson.Kind(v) != '{' {
		return w.errType("", tDict)
	}
	f := readBlock(v)
	if err := w.ReqString("type", f.typ); err != nil {
		return err
	}
	kind, ok := blockType(f.typ)
	if !ok {
		return w.errTag("", f.typ, blockTypeNames()...)
	}
	if r == roleSystem && kind != blockText {
		return w.errEnum("type", "text")
	}
	if err := w.cacheControl(f.cacheControl); err != nil {
		return err
	}
	size := &w.req.size
	switch kind {
	case blockText:
		return w.textBlock(&f, mb)
	case blockImage:
		return w.image(f.source, mb)
	case blockDocument:
		return w.document(&f, mb)
	case blockSearchResult:
		return w.searchResult(v, &f, mb)
	case blockToolUse:
		if r != roleAssistant {
			return w.errAt("type", "tool_use blocks are only allowed in assistant messages")
		}
		if err := w.ReqString("id", f.id); err != nil {
			return err
		}
		if !rawValid(f.id, validID[[]byte]) {
			return w.errAt("id", "String should match pattern '^[a-zA-Z0-9_-]+$'")
		}
		if err := w.ReqString("name", f.name); err != nil {
			return err
		}
		if err := w.ReqObject("input", f.input); err != nil {
			return err
		}
		size.TextBytes += int64(len(f.id) + len(f.name) - 4 + len(f.input))
		if mb != nil {
			mb.add(w, formats.Part{Type: formats.PartToolCall, ToolCall: &formats.ToolCall{
				ID: jsonval.Str(f.id), Name: jsonval.Str(f.name), Arguments: string(rawjson.Compact(nil, f.input))}})
		}
	case blockToolResult:
		if r != roleUser {
			return w.errAt("type", "tool_result blocks are only allowed in user messages")
		}
		return w.toolResult(&f, mb)
	case blockThinking:
		if err := w.ReqString("thinking", f.thinking); err != nil {
			return err
		}
		if err := w.ReqString("signature", f.signature); err != nil {
			return err
		}
		size.TextBytes += int64(len(f.thinking) - 2)
		if mb != nil {
			mb.add(w, formats.Part{Type: formats.PartThinking, Text: jsonval.Str(f.thinking), Signature: jsonval.Str(f.signature)})
		}
	case blockRedactedThinking:
		if err := w.ReqString("data", f.data); err != nil {
			return err
		}
		size.TextBytes += int64(len(f.data) - 2)
		if mb != nil {
			mb.add(w, formats.Part{Type: formats.PartRedactedThinking, Signature: jsonval.Str(f.data)})
		}
	default: // Anthropic-only: passed through, dropped when translating
		size.TextBytes += int64(len(v))
		if rawjson.StringIs(f.typ, "container_upload") {
			w.gate(formats.Gated{State: formats.StateFiles, Param: w.Param("file_id"), Tool: -1})
		}
		if w.ir != nil {
			w.ir.Drop("messages." + jsonval.Str(f.typ))
		}
	}
	return nil
}

// cacheControl validates a cache_control marker (an object); translation
// drops it.
func (w *walker) cacheControl(v []byte) *formats.Error {
	ok, err := w.OptObject("cache_control", v)
	if ok {
		w.drop("cache_control")
	}
	return err
}

// textBlock validates a text block.
func (w *walker) textBlock(f *blockFields, mb *msgBuilder) *formats.Error {
	if err := w.ReqString("text", f.text); err != nil {
		return err
	}
	if ok, err := w.OptArray("citations", f.citations); err != nil {
		return err
	} else if ok {
		w.drop("citations")
	}
	w.req.size.TextBytes += int64(len(f.text) - 2)
	if mb != nil {
		mb.add(w, formats.Part{Type: formats.PartText, Text: jsonval.Str(f.text)})
	}
	return nil
}

// sourceFields are the members of an image's or a document's source.
type sourceFields struct {
	typ, mediaType, data, url, fileID, content []byte
}

func readSource(v []byte) (f sourceFields) {
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch m := it.Member(); {
		case m.NameIs("type"):
			f.typ = it.Value()
		case m.NameIs("media_type"):
			f.mediaType = it.Value()
		case m.NameIs("data"):
			f.data = it.Value()
		case m.NameIs("url"):
			f.url = it.Value()
		case m.NameIs("file_id"):
			f.fileID = it.Value()
		case m.NameIs("content"):
			f.content = it.Value()
		}
	}
	return f
}

// image validates an image block's source.
func (w *walker) image(source []byte, mb *msgBuilder) *formats.Error {
	if err := w.ReqObject("source", source); err != nil {
		return err
	}
	w.Push("source")
	defer w.Pop()
	src := readSource(source)
	if err := w.ReqString("type", src.typ); err != nil {
		return err
	}
	m := &formats.Media{}
	switch {
	case rawjson.StringIs(src.typ, "base64"):
		if err := w.ReqString("media_type", src.mediaType); err != nil {
			return err
		}
		if !imageMediaType(src.mediaType) {
			return w.errEnum("media_type", "image/jpeg", "image/png", "image/gif", "image/webp")
		}
		if err := w.ReqString("data", src.data); err != nil {
			return err
		}
		if mb != nil {
			m.MediaType, m.Data = jsonval.Str(src.mediaType), jsonval.Str(src.data)
		}
	case rawjson.StringIs(src.typ, "url"):
		if err := w.ReqString("url", src.url); err != nil {
			return err
		}
		if mb != nil {
			m.URL = jsonval.Str(src.url)
		}
	case rawjson.StringIs(src.typ, "file"):
		if err := w.ReqString("file_id", src.fileID); err != nil {
			return err
		}
		if mb != nil {
			m.FileID = jsonval.Str(src.fileID)
		}
		w.gate(formats.Gated{State: formats.StateFiles, Param: w.Param("file_id"), Tool: -1})
	default:
		return w.errTag("", src.typ, "base64", "url", "file")
	}
	w.req.size.Images++
	if mb != nil {
		mb.add(w, formats.Part{Type: formats.PartImage, Media: m})
	}
	return nil
}

func imageMediaType(v []byte) bool {
	return rawjson.StringIs(v, "image/jpeg") || rawjson.StringIs(v, "image/png") ||
		rawjson.StringIs(v, "image/gif") || rawjson.StringIs(v, "image/webp")
}

// document validates a document block.
func (w *walker) document(f *blockFields, mb *msgBuilder) *formats.Error {
	for _, o := range [...]struct {
		name string
		v    []byte
	}{{"title", f.title}, {"context", f.context}} {
		if _, err := w.OptString(o.name, o.v); err != nil {
			return err
		}
	}
	if ok, err := w.OptObject("citations", f.citations); err != nil {
		return err
	} else if ok {
		w.drop("citations")
	}
	source := f.source
	if err := w.ReqObject("source", source); err != nil {
		return err
	}
	w.Push("source")
	defer w.Pop()
	src := readSource(source)
	if err := w.ReqString("type", src.typ); err != nil {
		return err
	}
	size := &w.req.size
	size.Files++
	var m *formats.Media
	if mb != nil {
		m = &formats.Media{}
		jsonval.SetStr(&m.Filename, f.title)
	}
	var imgs *msgBuilder // images of a content-source document
	switch {
	case rawjson.StringIs(src.typ, "base64"):
		if err := w.inlineDocument(src, "application/pdf"); err != nil {
			return err
		}
		size.MediaBytes += int64(len(src.data) - 2)
		if m != nil {
			m.MediaType, m.Data = "application/pdf", jsonval.Str(src.data)
		}
	case rawjson.StringIs(src.typ, "text"):
		if err := w.inlineDocument(src, "text/plain"); err != nil {
			return err
		}
		size.TextBytes += int64(len(src.data) - 2)
		if m != nil {
			m.MediaType, m.Text = "text/plain", jsonval.Str(src.data)
		}
	case rawjson.StringIs(src.typ, "url"):
		if err := w.ReqString("url", src.url); err != nil {
			return err
		}
		if m != nil {
			m.MediaType, m.URL = "application/pdf", jsonval.Str(src.url)
		}
		// the upstream fetches it: nothing bounds its pages
		w.gate(formats.Gated{State: formats.StateDocumentURL, Param: w.Param("url"), Tool: -1})
	case rawjson.StringIs(src.typ, "file"):
		if err := w.ReqString("file_id", src.fileID); err != nil {
			return err
		}
		if m != nil {
			m.FileID = jsonval.Str(src.fileID)
		}
		w.gate(formats.Gated{State: formats.StateFiles, Param: w.Param("file_id"), Tool: -1})
	case rawjson.StringIs(src.typ, "content"):
		switch rawjson.Kind(src.content) {
		case 0:
			return w.errMissing("content")
		case '"':
			size.TextBytes += int64(len(src.content) - 2)
			if m != nil {
				m.MediaType, m.Text = "text/plain", jsonval.Str(src.content)
			}
		case '[':
			// text and image blocks: the text becomes the document's, the
			// images follow it
			w.Push("content")
			var text []byte
			ci := rawjson.Array(src.content, 0)
			for ci.Next() {
				w.PushIndex(ci.Len() - 1)
				bv := ci.Value()
				if rawjson.Kind(bv) != '{' {
					return w.errType("", tDict)
				}
				bf := readBlock(bv)
				if err := w.ReqString("type", bf.typ); err != nil {
					return err
				}
				switch {
				case rawjson.StringIs(bf.typ, "text"):
					if err := w.ReqString("text", bf.text); err != nil {
						return err
					}
					size.TextBytes += int64(len(bf.text) - 2)
					if m != nil {
						if len(text) > 0 {
							text = append(text, '\n')
						}
						text, _ = rawjson.AppendUnquote(text, bf.text)
					}
				case rawjson.StringIs(bf.typ, "image"):
					if m != nil && imgs == nil {
						imgs = &msgBuilder{role: roleUser}
					}
					if err := w.image(bf.source, imgs); err != nil {
						return err
					}
				default:
					return w.errTag("type", bf.typ, "text", "image")
				}
				w.Pop()
			}
			w.Pop()
			if m != nil {
				m.MediaType, m.Text = "text/plain", string(text)
			}
		default:
			return w.errType("content", tList)
		}
	default:
		return w.errTag("", src.typ, "base64", "text", "url", "content", "file")
	}
	if mb != nil {
		mb.add(w, formats.Part{Type: formats.PartFile, Media: m})
		if imgs != nil && imgs.cur != nil {
			for _, p := range imgs.cur.Parts {
				mb.add(w, p)
			}
		}
	}
	return nil
}

// searchResult validates a search_result block; its text blocks become
// text (the source and title go with them).
func (w *walker) searchResult(v []byte, f *blockFields, mb *msgBuilder) *formats.Error {
	src := rawjson.Get(v, "source")
	if err := w.ReqString("source", src); err != nil {
		return err
	}
	if err := w.ReqString("title", f.title); err != nil {
		return err
	}
	if ok, err := w.OptObject("citations", f.citations); err != nil {
		return err
	} else if ok {
		w.drop("citations")
	}
	if rawjson.Kind(f.content) != '[' {
		if f.content == nil {
			return w.errMissing("content")
		}
		return w.errType("content", tList)
	}
	size := &w.req.size
	size.TextBytes += int64(len(src) + len(f.title) - 4)
	var text []byte
	if mb != nil {
		text = append(text, "Search result: "...)
		text, _ = rawjson.AppendUnquote(text, f.title)
		text = append(text, " ("...)
		text, _ = rawjson.AppendUnquote(text, src)
		text = append(text, ')')
	}
	w.Push("content")
	ci := rawjson.Array(f.content, 0)
	for ci.Next() {
		w.PushIndex(ci.Len() - 1)
		bv := ci.Value()
		if rawjson.Kind(bv) != '{' {
			return w.errType("", tDict)
		}
		t := rawjson.Get(bv, "type")
		if !rawjson.StringIs(t, "text") {
			if err := w.ReqString("type", t); err != nil {
				return err
			}
			return w.errTag("type", t, "text")
		}
		tv := rawjson.Get(bv, "text")
		if err := w.ReqString("text", tv); err != nil {
			return err
		}
		size.TextBytes += int64(len(tv) - 2)
		if mb != nil {
			text = append(text, '\n')
			text, _ = rawjson.AppendUnquote(text, tv)
		}
		w.Pop()
	}
	w.Pop()
	if mb != nil {
		mb.add(w, formats.Part{Type: formats.PartText, Text: string(text)})
	}
	return nil
}

// toolResult validates a tool_result block.
func (w *walker) toolResult(f *blockFields, mb *msgBuilder) *formats.Error {
	if err := w.ReqString("tool_use_id", f.toolUseID); err != nil {
		return err
	}
	isErr, _, err := w.OptBool("is_error", f.isError)
	if err != nil {
		return err
	}
	size := &w.req.size
	size.TextBytes += int64(len(f.toolUseID) - 2)
	var res *formats.ToolResult
	if mb != nil {
		id := jsonval.Str(f.toolUseID)
		res = &formats.ToolResult{CallID: id, Name: w.ir.ToolName(id), IsError: isErr}
	}
	switch rawjson.Kind(f.content) {
	case 0, 'n':
	case '"':
		size.TextBytes += int64(len(f.content) - 2)
		if res != nil && len(f.content) > 2 {
			res.Parts = append(res.Parts, formats.Part{Type: formats.PartText, Text: jsonval.Str(f.content)})
		}
	case '[':
		w.Push("content")
		var sub *msgBuilder
		if res != nil {
			sub = &msgBuilder{role: roleUser}
		}
		ci := rawjson.Array(f.content, 0)
		for ci.Next() {
			w.PushIndex(ci.Len() - 1)
			bv := ci.Value()
			if rawjson.Kind(bv) != '{' {
				return w.errType("", tDict)
			}
			bf := readBlock(bv)
			if err := w.ReqString("type", bf.typ); err != nil {
				return err
			}
			if err := w.cacheControl(bf.cacheControl); err != nil {
				return err
			}
			kind, _ := blockType(bf.typ)
			var err *formats.Error
			switch kind {
			case blockText:
				err = w.textBlock(&bf, sub)
			case blockImage:
				err = w.image(bf.source, sub)
			case blockDocument:
				err = w.document(&bf, sub)
			case blockSearchResult:
				err = w.searchResult(bv, &bf, sub)
			default: // tool_reference and other Anthropic-only content
				size.TextBytes += int64(len(bv))
				w.drop("tool_result." + jsonval.Str(bf.typ))
			}
			if err != nil {
				return err
			}
			w.Pop()
		}
		w.Pop()
		if sub != nil && sub.cur != nil {
			res.Parts = sub.cur.Parts
		}
	default:
		return w.errType("content", tList)
	}
	if mb != nil {
		mb.add(w, formats.Part{Type: formats.PartToolResult, ToolResult: res})
	}
	return nil
}

// inlineDocument checks a document source given inline (base64 or text):
// its media type, which must be want, and its data.
func (w *walker) inlineDocument(src sourceFields, want string) *formats.Error {
	if err := w.ReqString("media_type", src.mediaType); err != nil {
		return err
	}
	if !rawjson.StringIs(src.mediaType, want) {
		return w.errEnum("media_type", want)
	}
	return w.ReqString("data", src.data)
}
