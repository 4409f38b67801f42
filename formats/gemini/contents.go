package gemini

import (
	"encoding/base64"
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// contents walks the contents member of the top-level iterator in place and
// reports how many contents it holds. Like Google, it takes a single
// Content object for a one-element list.
func (w *walker) contents(top *rawjson.Iter) (int, *formats.Error) {
	b, start := top.Bytes(), top.Start()
	w.Push("contents")
	switch b[start] {
	case 'n':
		return 0, nil
	case '{':
		w.PushIndex(0)
		end, err := w.content(b, start)
		if err != nil {
			return 0, err
		}
		top.SetEnd(end)
		return 1, nil
	case '[':
	default:
		return 0, w.errType("", top.Value(), "list")
	}
	it := rawjson.Array(b, start)
	for it.NextLazy() {
		w.PushIndex(it.Len() - 1)
		if b[it.Start()] != '{' {
			return 0, w.errType("", it.Value(), "object")
		}
		end, err := w.content(b, it.Start())
		if err != nil {
			return 0, err
		}
		it.SetEnd(end)
		w.Pop()
	}
	if it.Err() != nil {
		return 0, invalid("contents", "Invalid JSON payload received.")
	}
	top.SetEnd(it.End() + 1)
	return it.Len(), nil
}

// content validates the Content object at b[start] (the path ends with its
// index) and returns the offset just past it.
func (w *walker) content(b []byte, start int) (int, *formats.Error) {
	var roleV []byte
	nParts := -1
	var partsErr *formats.Error
	w.scratch = w.scratch[:0]
	var nameBuf [32]byte
	it := rawjson.Object(b, start)
	for it.NextLazy() {
		switch string(key(&it, nameBuf[:0])) {
		case "role":
			roleV = it.Value()
		case "parts":
			if nParts >= 0 {
				return 0, w.dupError("parts")
			}
			var end int
			nParts, end, partsErr = w.parts(b, it.Start())
			if partsErr == nil {
				it.SetEnd(end)
			}
		}
	}
	end := it.End() + 1
	model := false
	switch {
	case absent(roleV):
	case rawjson.Kind(roleV) != '"':
		return end, w.errType("role", roleV, "TYPE_STRING")
	case rawjson.StringIs(roleV, "user"), rawjson.StringIs(roleV, "function"):
	case rawjson.StringIs(roleV, "model"):
		model = true
	default:
		return end, w.errValue("role", "Please use a valid role: user, model.")
	}
	if partsErr != nil {
		return end, partsErr
	}
	if nParts <= 0 {
		return end, w.errValue("parts", "contents.parts must not be empty.")
	}
	w.req.size.Messages++
	if w.ir == nil {
		return end, nil
	}
	return end, w.addContent(model)
}

// addContent appends the walked parts to the IR as one message, or, for a
// user turn with function responses, as tool messages (the responses) and
// user messages (the rest), in order.
func (w *walker) addContent(model bool) *formats.Error {
	ir := w.ir
	if model {
		var parts []formats.Part
		for j := range w.scratch {
			switch p := w.scratch[j]; p.Type {
			case skipPart:
			case formats.PartToolResult:
				w.Push("parts")
				w.PushIndex(j)
				return w.reject("function_response", "a function response belongs in a user turn.")
			default:
				parts = append(parts, p)
			}
		}
		if len(parts) > 0 {
			ir.Messages = append(ir.Messages, formats.Message{Role: formats.RoleAssistant, Parts: parts})
		}
		return nil
	}
	first := len(ir.Messages) // messages of this turn start here
	for j := range w.scratch {
		p := w.scratch[j]
		role := formats.RoleUser
		switch p.Type {
		case skipPart:
			continue
		case formats.PartToolCall:
			w.Push("parts")
			w.PushIndex(j)
			return w.reject("function_call", "a function call belongs in a model turn.")
		case formats.PartToolResult:
			role = formats.RoleTool
		}
		if n := len(ir.Messages); n > first && ir.Messages[n-1].Role == role {
			ir.Messages[n-1].Parts = append(ir.Messages[n-1].Parts, p)
			continue
		}
		ir.Messages = append(ir.Messages, formats.Message{Role: role, Parts: []formats.Part{p}})
	}
	return nil
}

// parts walks the parts list at b[start] (a single Part object is taken as
// a one-element list) and returns how many parts it holds and the offset
// just past it.
func (w *walker) parts(b []byte, start int) (int, int, *formats.Error) {
	w.Push("parts")
	defer w.Pop()
	switch b[start] {
	case 'n':
		end, _ := rawjson.SkipValue(b, start)
		return 0, end, nil
	case '{':
		end, err := rawjson.SkipValue(b, start)
		if err != nil {
			return 0, 0, invalid(w.Param(""), "Invalid JSON payload received.")
		}
		w.PushIndex(0)
		if err := w.part(b[start:end]); err != nil {
			return 0, 0, err
		}
		w.Pop()
		return 1, end, nil
	case '[':
	default:
		end, _ := rawjson.SkipValue(b, start)
		return 0, 0, w.errType("", b[start:end], "list")
	}
	it := rawjson.Array(b, start)
	for it.Next() {
		w.PushIndex(it.Len() - 1)
		if err := w.part(it.Value()); err != nil {
			return 0, 0, err
		}
		w.Pop()
	}
	if it.Err() != nil {
		return 0, 0, invalid(w.Param(""), "Invalid JSON payload received.")
	}
	return it.Len(), it.End() + 1, nil
}

// Part data fields (the proto oneof "data").
const (
	dText = iota
	dInline
	dFile
	dCall
	dResponse
	dCode
	dCodeResult
	nData
)

var dataSnake = [nData]string{"text", "inline_data", "file_data", "function_call", "function_response", "executable_code", "code_execution_result"}

func dataField(name []byte) int {
	switch string(name) {
	case "text":
		return dText
	case "inlineData", "inline_data":
		return dInline
	case "fileData", "file_data":
		return dFile
	case "functionCall", "function_call":
		return dCall
	case "functionResponse", "function_response":
		return dResponse
	case "executableCode", "executable_code":
		return dCode
	case "codeExecutionResult", "code_execution_result":
		return dCodeResult
	}
	return -1
}

// part validates one Part (the path ends with its index) and, when building
// the IR, appends exactly one scratch part for it.
func (w *walker) part(v []byte) *formats.Error {
	if rawjson.Kind(v) != '{' {
		return w.errType("", v, "object")
	}
	kind := -1
	var data, thought, signature []byte
	var unknown []byte // the name of an unknown member (a newer data kind?)
	var nameBuf [40]byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		name := key(&it, nameBuf[:0])
		if d := dataField(name); d >= 0 {
			val := it.Value()
			if rawjson.IsNull(val) {
				continue
			}
			if kind >= 0 {
				return invalid(w.Param(dataSnake[d]), "Invalid JSON payload received. Oneof field 'data' is already set. Cannot set '"+w.Param(dataSnake[d])+"'.")
			}
			kind, data = d, val
			continue
		}
		switch string(name) {
		case "thought":
			thought = it.Value()
		case "thoughtSignature", "thought_signature":
			signature = it.Value()
		case "videoMetadata", "video_metadata", "mediaResolution", "media_resolution", "partMetadata", "part_metadata":
		default:
			if unknown == nil {
				unknown = v[it.Member().Start+1 : it.Member().Start+1+len(it.Member().Name)]
			}
		}
	}
	isThought, _, err := w.OptBool("thought", thought)
	if err != nil {
		return err
	}
	sig := ""
	if !absent(signature) {
		if err := w.checkBase64("thought_signature", signature); err != nil {
			return err
		}
		w.req.size.TextBytes += int64(len(signature) - 2)
		if w.ir != nil {
			sig = jsonval.Str(signature)
		}
	}
	size := &w.req.size
	var p formats.Part
	p.Type = skipPart
	switch kind {
	case -1:
		if unknown == nil {
			return invalid(w.Param("data"), "* "+w.Scope+"."+w.Param("data")+": required oneof field 'data' must have one initialized field")
		}
		// a data kind this gateway does not know: passed through as is,
		// dropped when translating
		size.TextBytes += int64(len(v))
		if w.ir != nil {
			w.ir.Drop("contents.parts." + string(unknown))
		}
	case dText:
		if rawjson.Kind(data) != '"' {
			return w.errType("text", data, "TYPE_STRING")
		}
		size.TextBytes += int64(len(data) - 2)
		if w.ir != nil && !isThought && len(data) > 2 {
			p = formats.Part{Type: formats.PartText, Text: jsonval.Str(data)}
		}
	case dInline:
		w.Push("inline_data")
		m, err := w.blob(data)
		w.Pop()
		if err != nil {
			return err
		}
		if m != nil {
			p = *m
		}
	case dFile:
		w.Push("file_data")
		err := w.fileData(data)
		w.Pop()
		if err != nil {
			return err
		}
	case dCall:
		w.Push("function_call")
		tc, err := w.functionCall(data)
		w.Pop()
		if err != nil {
			return err
		}
		if tc != nil {
			tc.Signature = sig
			p = formats.Part{Type: formats.PartToolCall, ToolCall: tc}
		}
	case dResponse:
		w.Push("function_response")
		res, err := w.functionResponse(data)
		w.Pop()
		if err != nil {
			return err
		}
		if res != nil {
			p = formats.Part{Type: formats.PartToolResult, ToolResult: res}
		}
	case dCode, dCodeResult:
		if rawjson.Kind(data) != '{' {
			return w.errType(dataSnake[kind], data, "object")
		}
		size.TextBytes += int64(len(data))
		if w.ir != nil {
			// built-in code execution history: carried as text (emulation)
			p = codePart(kind, data)
		}
	}
	if w.ir != nil {
		w.scratch = append(w.scratch, p)
	}
	return nil
}

// codePart renders executableCode / codeExecutionResult as text.
func codePart(kind int, v []byte) formats.Part {
	var lang, code, outcome, output string
	it := rawjson.Object(v, 0)
	var nameBuf [16]byte
	for it.Next() {
		if rawjson.Kind(it.Value()) != '"' {
			continue
		}
		switch string(key(&it, nameBuf[:0])) {
		case "language":
			lang = strings.ToLower(jsonval.Str(it.Value()))
		case "code":
			code = jsonval.Str(it.Value())
		case "outcome":
			outcome = jsonval.Str(it.Value())
		case "output":
			output = jsonval.Str(it.Value())
		}
	}
	if kind == dCode {
		if lang == "" || lang == "language_unspecified" {
			lang = "python"
		}
		return formats.Part{Type: formats.PartText, Text: "```" + lang + "\n" + code + "\n```"}
	}
	text := "Code execution result"
	if outcome != "" {
		text += " (" + outcome + ")"
	}
	return formats.Part{Type: formats.PartText, Text: text + ":\n" + output}
}

// blob validates inline data {mimeType, data} (the path ends with its
// name), measures it and, when building the IR, converts it to a media part.
func (w *walker) blob(v []byte) (*formats.Part, *formats.Error) {
	if rawjson.Kind(v) != '{' {
		return nil, w.errType("", v, "object")
	}
	var mime, data []byte
	var nameBuf [32]byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch string(key(&it, nameBuf[:0])) {
		case "mimeType", "mime_type":
			mime = it.Value()
		case "data":
			data = it.Value()
		}
	}
	if err := w.ReqString("mime_type", mime); err != nil {
		return nil, err
	}
	if err := w.checkBase64("data", data); err != nil {
		return nil, err
	}
	size := &w.req.size
	n := int64(len(data) - 2)
	mt := mediaKind(mime)
	switch mt {
	case "image":
		size.Images++
	case "audio":
		size.Audio++
		size.MediaBytes += n
	case "text":
		size.TextBytes += n // base64 is longer than the text it encodes
	default: // PDF, video, other documents
		size.Files++
		size.MediaBytes += n
	}
	if w.ir == nil {
		return nil, nil
	}
	typ := strings.ToLower(jsonval.Str(mime))
	b64 := stdBase64(jsonval.Str(data))
	switch mt {
	case "image":
		return &formats.Part{Type: formats.PartImage, Media: &formats.Media{MediaType: typ, Data: b64}}, nil
	case "audio":
		return &formats.Part{Type: formats.PartAudio, Media: &formats.Media{MediaType: typ, Data: b64}}, nil
	case "pdf":
		return &formats.Part{Type: formats.PartFile, Media: &formats.Media{MediaType: typ, Data: b64}}, nil
	case "text":
		text, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, w.reject("data", "the inline text could not be decoded.")
		}
		return &formats.Part{Type: formats.PartFile, Media: &formats.Media{MediaType: typ, Text: string(text)}}, nil
	}
	return nil, w.reject("mime_type", typ+" input cannot be sent to this model's provider.")
}

// mediaKind classifies a raw MIME type string: image, audio, text, pdf,
// video or other.
func mediaKind(v []byte) string {
	s := v
	if len(s) >= 2 {
		s = s[1 : len(s)-1]
	}
	switch {
	case hasPrefixFold(s, "image/"):
		return "image"
	case hasPrefixFold(s, "audio/"):
		return "audio"
	case hasPrefixFold(s, "video/"):
		return "video"
	case hasPrefixFold(s, "text/"):
		return "text"
	case hasPrefixFold(s, "application/pdf"):
		return "pdf"
	}
	return "other"
}

func hasPrefixFold(s []byte, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// fileData validates a file reference {mimeType, fileUri}. Translation
// rejects it: other vendors cannot read Google's files.
func (w *walker) fileData(v []byte) *formats.Error {
	if rawjson.Kind(v) != '{' {
		return w.errType("", v, "object")
	}
	var mime, uri []byte
	var nameBuf [32]byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch string(key(&it, nameBuf[:0])) {
		case "mimeType", "mime_type":
			mime = it.Value()
		case "fileUri", "file_uri":
			uri = it.Value()
		}
	}
	if _, err := w.OptString("mime_type", mime); err != nil {
		return err
	}
	if err := w.ReqString("file_uri", uri); err != nil {
		return err
	}
	size := &w.req.size
	size.TextBytes += int64(len(uri))
	if rawjson.Kind(mime) == '"' && mediaKind(mime) == "image" {
		size.Images++
	} else {
		w.req.refs++
	}
	if w.ir != nil {
		return w.reject("", "file references (Files API or YouTube URIs) cannot be read by this model's provider; send the data inline.")
	}
	// a file in the operator's project, or a URL Google fetches
	w.gate(formats.Gated{State: formats.StateFiles, Param: w.Param("file_uri"), Tool: -1})
	return nil
}

// functionCall validates {id?, name, args?} and converts it.
func (w *walker) functionCall(v []byte) (*formats.ToolCall, *formats.Error) {
	if rawjson.Kind(v) != '{' {
		return nil, w.errType("", v, "object")
	}
	var id, name, args []byte
	var nameBuf [16]byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch string(key(&it, nameBuf[:0])) {
		case "id":
			id = it.Value()
		case "name":
			name = it.Value()
		case "args":
			args = it.Value()
		}
	}
	hasID, err := w.OptString("id", id)
	if err != nil {
		return nil, err
	}
	if err := w.ReqString("name", name); err != nil {
		return nil, err
	}
	hasArgs, err := w.OptObject("args", args)
	if err != nil {
		return nil, err
	}
	w.req.size.TextBytes += int64(len(v))
	if w.ir == nil {
		return nil, nil
	}
	n, ok := toSafe(jsonval.Str(name))
	if !ok {
		return nil, w.reject("name", "the function name is too long for this model's provider (64 characters).")
	}
	tc := &formats.ToolCall{Name: n, Arguments: "{}"}
	if hasID {
		tc.ID = jsonval.Str(id)
	}
	if hasArgs {
		tc.Arguments = string(rawjson.Compact(nil, args))
	}
	return tc, nil
}

// functionResponse validates {id?, name, response?, parts?} and converts it
// (docs/translation.md, "Messages and roles" GEM →): the content is
// response.output when it is a string, else the compact JSON of response; a
// response with only an error is an error result.
func (w *walker) functionResponse(v []byte) (*formats.ToolResult, *formats.Error) {
	if rawjson.Kind(v) != '{' {
		return nil, w.errType("", v, "object")
	}
	var id, name, response, parts []byte
	var nameBuf [16]byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch string(key(&it, nameBuf[:0])) {
		case "id":
			id = it.Value()
		case "name":
			name = it.Value()
		case "response":
			response = it.Value()
		case "parts":
			parts = it.Value()
		}
	}
	hasID, err := w.OptString("id", id)
	if err != nil {
		return nil, err
	}
	if err := w.ReqString("name", name); err != nil {
		return nil, err
	}
	hasResponse, err := w.OptObject("response", response)
	if err != nil {
		return nil, err
	}
	w.req.size.TextBytes += int64(len(v))
	var media []formats.Part
	switch rawjson.Kind(parts) {
	case 0, 'n':
	case '[':
		w.Push("parts")
		pi := rawjson.Array(parts, 0)
		for pi.Next() {
			w.PushIndex(pi.Len() - 1)
			p := pi.Value()
			if rawjson.Kind(p) != '{' {
				return nil, w.errType("", p, "object")
			}
			var blob []byte
			var nb [16]byte
			bi := rawjson.Object(p, 0)
			for bi.Next() {
				switch string(key(&bi, nb[:0])) {
				case "inlineData", "inline_data":
					blob = bi.Value()
				case "fileData", "file_data":
					w.Push("file_data")
					if err := w.fileData(bi.Value()); err != nil {
						return nil, err
					}
					w.Pop()
				}
			}
			if blob != nil {
				w.Push("inline_data")
				m, err := w.blob(blob)
				if err != nil {
					return nil, err
				}
				w.Pop()
				if m != nil {
					media = append(media, *m)
				}
			}
			w.Pop()
		}
		w.Pop()
	default:
		return nil, w.errType("parts", parts, "list")
	}
	if w.ir == nil {
		return nil, nil
	}
	n, ok := toSafe(jsonval.Str(name))
	if !ok {
		return nil, w.reject("name", "the function name is too long for this model's provider (64 characters).")
	}
	res := &formats.ToolResult{Name: n}
	if hasID {
		res.CallID = jsonval.Str(id)
	}
	if hasResponse {
		text, isErr := responseText(response)
		res.IsError = isErr
		if text != "" {
			res.Parts = append(res.Parts, formats.Part{Type: formats.PartText, Text: text})
		}
	}
	res.Parts = append(res.Parts, media...)
	return res, nil
}

// responseText is the text of a function response object.
func responseText(resp []byte) (text string, isErr bool) {
	var output, errV []byte
	n := 0
	it := rawjson.Object(resp, 0)
	for it.Next() {
		n++
		switch {
		case it.NameIs("output"):
			output = it.Value()
		case it.NameIs("error"):
			errV = it.Value()
		}
	}
	switch {
	case rawjson.Kind(output) == '"':
		return jsonval.Str(output), false
	case output == nil && errV != nil && n == 1:
		if rawjson.Kind(errV) == '"' {
			return jsonval.Str(errV), true
		}
		return string(rawjson.Compact(nil, errV)), true
	}
	return string(rawjson.Compact(nil, resp)), false
}

// systemInstruction validates the system Content. Its role is ignored
// (Gemini CLI sends "user"); translation keeps its text parts.
func (w *walker) systemInstruction(v []byte) *formats.Error {
	if ok, err := w.OptObject("system_instruction", v); !ok {
		return err
	}
	w.Push("system_instruction")
	defer w.Pop()
	var parts, role []byte
	var nameBuf [16]byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch string(key(&it, nameBuf[:0])) {
		case "parts":
			parts = it.Value()
		case "role":
			role = it.Value()
		}
	}
	if _, err := w.OptString("role", role); err != nil {
		return err
	}
	w.req.size.Messages++
	if absent(parts) {
		return nil
	}
	w.scratch = w.scratch[:0]
	if _, _, err := w.parts(parts, 0); err != nil {
		return err
	}
	if w.ir == nil {
		return nil
	}
	for j, p := range w.scratch {
		switch p.Type {
		case skipPart:
		case formats.PartText:
			w.ir.System = append(w.ir.System, p)
		default:
			w.Push("parts")
			w.PushIndex(j)
			return w.reject("", "only text can be sent as a system instruction to this model's provider.")
		}
	}
	return nil
}
