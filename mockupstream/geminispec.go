package mockupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// The Gemini request schema, for Google's strict JSON parsing: unknown
// field names are rejected, lowerCamelCase and snake_case names are both
// accepted (as Google's API does), enums are checked case-insensitively.

// gSpec is the schema of one JSON value of a Gemini request.
type gSpec struct {
	proto  string            // the proto type, for "Invalid value" messages
	fields map[string]*gSpec // a message: its fields by lowerCamelCase name
	mapOf  *gSpec            // a map with keys of the client's choosing (Schema.properties)
	free   bool              // any JSON value (Struct, free-form JSON schema)
	enum   []string          // an enum: its values
}

var (
	gLeaf = &gSpec{}
	gFree = &gSpec{free: true}
)

func gMessage(proto string, fields map[string]*gSpec) *gSpec {
	return &gSpec{proto: "type.googleapis.com/google.ai.generativelanguage.v1beta." + proto, fields: fields}
}

func gEnum(proto string, values ...string) *gSpec {
	return &gSpec{proto: "type.googleapis.com/google.ai.generativelanguage.v1beta." + proto, enum: values}
}

// gSchemaSpec is Google's Schema (an OpenAPI subset), recursive.
var gSchemaSpec = func() *gSpec {
	s := gMessage("Schema", nil)
	s.fields = map[string]*gSpec{
		"type":   gEnum("Type", "TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"),
		"format": gLeaf, "title": gLeaf, "description": gLeaf, "nullable": gLeaf, "enum": gLeaf,
		"maxItems": gLeaf, "minItems": gLeaf, "properties": {mapOf: s}, "required": gLeaf,
		"minProperties": gLeaf, "maxProperties": gLeaf, "minLength": gLeaf, "maxLength": gLeaf, "pattern": gLeaf,
		"example": gFree, "anyOf": s, "propertyOrdering": gLeaf, "default": gFree, "items": s,
		"minimum": gLeaf, "maximum": gLeaf,
	}
	return s
}()

var gContentSpec = gMessage("Content", map[string]*gSpec{
	"role": gLeaf,
	"parts": gMessage("Part", map[string]*gSpec{
		"text":       gLeaf,
		"inlineData": gMessage("Blob", map[string]*gSpec{"mimeType": gLeaf, "data": gLeaf}),
		"fileData":   gMessage("FileData", map[string]*gSpec{"mimeType": gLeaf, "fileUri": gLeaf}),
		"functionCall": gMessage("FunctionCall", map[string]*gSpec{
			"id": gLeaf, "name": gLeaf, "args": gFree,
		}),
		"functionResponse": gMessage("FunctionResponse", map[string]*gSpec{
			"id": gLeaf, "name": gLeaf, "response": gFree, "parts": gFree, "willContinue": gLeaf, "scheduling": gLeaf,
		}),
		"executableCode": gFree, "codeExecutionResult": gFree, "toolCall": gFree, "toolResponse": gFree,
		"thought": gLeaf, "thoughtSignature": gLeaf, "videoMetadata": gFree, "mediaResolution": gFree,
		"partMetadata": gFree,
	}),
})

var gGenerateSpec = gMessage("GenerateContentRequest", map[string]*gSpec{
	"model":             gLeaf,
	"contents":          gContentSpec,
	"systemInstruction": gContentSpec,
	"generationConfig": gMessage("GenerationConfig", map[string]*gSpec{
		"candidateCount": gLeaf, "stopSequences": gLeaf, "maxOutputTokens": gLeaf, "temperature": gLeaf,
		"topP": gLeaf, "topK": gLeaf, "seed": gLeaf, "presencePenalty": gLeaf, "frequencyPenalty": gLeaf,
		"responseLogprobs": gLeaf, "logprobs": gLeaf, "responseMimeType": gLeaf, "responseSchema": gSchemaSpec,
		"responseJsonSchema": gFree, "responseModalities": gLeaf, "enableEnhancedCivicAnswers": gLeaf,
		"speechConfig": gFree, "imageConfig": gFree, "mediaResolution": gLeaf,
		"thinkingConfig": gMessage("ThinkingConfig", map[string]*gSpec{
			"includeThoughts": gLeaf, "thinkingBudget": gLeaf, "thinkingLevel": gLeaf,
		}),
	}),
	"tools": gMessage("Tool", map[string]*gSpec{
		"functionDeclarations": gMessage("FunctionDeclaration", map[string]*gSpec{
			"name": gLeaf, "description": gLeaf, "behavior": gLeaf, "parameters": gSchemaSpec,
			"parametersJsonSchema": gFree, "response": gSchemaSpec, "responseJsonSchema": gFree,
		}),
		"googleSearchRetrieval": gFree, "codeExecution": gFree, "googleSearch": gFree, "computerUse": gFree,
		"urlContext": gFree, "fileSearch": gFree, "googleMaps": gFree, "mcpServers": gFree,
	}),
	"toolConfig": gMessage("ToolConfig", map[string]*gSpec{
		"functionCallingConfig": gMessage("FunctionCallingConfig", map[string]*gSpec{
			"mode":                        gEnum("FunctionCallingConfig.Mode", "MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"),
			"allowedFunctionNames":        gLeaf,
			"streamFunctionCallArguments": gLeaf,
		}),
		"retrievalConfig":                  gFree,
		"includeServerSideToolInvocations": gLeaf,
	}),
	"safetySettings": gMessage("SafetySetting", map[string]*gSpec{"category": gLeaf, "threshold": gLeaf, "method": gLeaf}),
	"cachedContent":  gLeaf,
	"serviceTier":    gLeaf,
	"store":          gLeaf,
})

var gCountSpec = gMessage("CountTokensRequest", map[string]*gSpec{
	"contents":               gContentSpec,
	"generateContentRequest": gGenerateSpec,
})

// lowerCamel is the lowerCamelCase of a snake_case name (a camelCase name
// is unchanged).
func lowerCamel(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	var b strings.Builder
	up := false
	for _, r := range s {
		switch {
		case r == '_':
			up = b.Len() > 0
		case up:
			b.WriteRune(unicode.ToUpper(r))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// snake is the snake_case (proto) name of a lowerCamelCase name.
func snake(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// gInvalidValue is Google's message for a value of the wrong kind.
func gInvalidValue(path, proto string, raw []byte) *apiError {
	v := string(bytes.TrimSpace(raw))
	if len(v) > 0 && v[0] != '"' {
		v = strconv.Quote(v)
	}
	return gInvalid(path, "Invalid value at '%s' (%s), %s", path, proto, truncate(v, 80))
}

// gNormalize checks raw against spec and returns it with every field name in
// lowerCamelCase. path is where raw is, as Google names it.
func gNormalize(raw json.RawMessage, spec *gSpec, path string) (json.RawMessage, *apiError) {
	raw = bytes.TrimSpace(raw)
	if spec.free || len(raw) == 0 || isNull(raw) {
		return raw, nil
	}
	switch {
	case spec.enum != nil:
		// The enums checked here are single fields, never lists.
		var s string
		if json.Unmarshal(raw, &s) != nil || !containsFold(spec.enum, s) {
			return nil, gInvalidValue(path, spec.proto, raw)
		}
		return jsonString(strings.ToUpper(s)), nil
	case raw[0] == '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil, gBadJSON()
		}
		var b bytes.Buffer
		b.WriteByte('[')
		for i, e := range elems {
			if bytes.HasPrefix(bytes.TrimSpace(e), []byte("[")) {
				return nil, gInvalid(path, "Invalid JSON payload received. Unknown name at '%s': Proto field is not repeating, cannot start list.", path)
			}
			n, err := gNormalize(e, spec, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(n)
		}
		b.WriteByte(']')
		return b.Bytes(), nil
	case spec.fields == nil && spec.mapOf == nil:
		return raw, nil
	case raw[0] != '{':
		return nil, gInvalidValue(path, spec.proto, raw)
	}
	keys, err := objectKeys(raw)
	if err != nil {
		return nil, gBadJSON()
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil, gBadJSON()
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		name, child := k, spec.mapOf
		childPath := fmt.Sprintf("%s[%d].value", path, i)
		if spec.fields != nil {
			name = lowerCamel(k)
			child = spec.fields[name]
			childPath = strings.TrimPrefix(path+"."+snake(name), ".")
		}
		if child == nil {
			if path == "" {
				return nil, gInvalid("", "Invalid JSON payload received. Unknown name %q: Cannot find field.", k)
			}
			return nil, gInvalid(path, "Invalid JSON payload received. Unknown name %q at '%s': Cannot find field.", k, path)
		}
		n, err := gNormalize(values[k], child, childPath)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(name))
		b.WriteByte(':')
		b.Write(n)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
