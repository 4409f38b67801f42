// Package openaispec checks JSON against OpenAI's published schemas of
// the Responses API (the Response object and the ResponseStreamEvent
// union), for the tests of formats/responses and mockupstream. The schema
// file is a vendored part of OpenAI's OpenAPI description; README.md names
// its source, commit and changes.
package openaispec

import (
	"bytes"
	_ "embed"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed openai-responses.schema.json
var schemaFile []byte

// schemas compiles, once, the named schemas and each member of the event
// union under "event: <its type>" (such as "event: response.created"), so
// that a failure names what an event lacks.
var schemas = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaFile))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "https://modelgate.test/openai-responses.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	out := map[string]*jsonschema.Schema{}
	for _, name := range []string{"Response", "ResponseStreamEvent", "ResponseUsage", "FunctionTool"} {
		if out[name], err = c.Compile(url + "#/components/schemas/" + name); err != nil {
			return nil, err
		}
	}
	defs := doc.(map[string]any)["components"].(map[string]any)["schemas"].(map[string]any)
	for _, m := range defs["ResponseStreamEvent"].(map[string]any)["anyOf"].([]any) {
		ref := m.(map[string]any)["$ref"].(string)
		ev := defs[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
		typ := ev["properties"].(map[string]any)["type"].(map[string]any)["enum"].([]any)[0].(string)
		if out["event: "+typ], err = c.Compile(url + ref); err != nil {
			return nil, err
		}
	}
	return out, nil
})

// Problem is why v is not an instance of the named schema ("Response",
// "ResponseStreamEvent", "ResponseUsage", "FunctionTool" or "event:
// <type>"); "" when it is one.
func Problem(schema string, v []byte) string {
	all, err := schemas()
	if err != nil {
		return "the vendored schema does not compile: " + err.Error()
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(v))
	if err != nil {
		return "not JSON: " + err.Error()
	}
	sch := all[schema]
	if sch == nil {
		return "no schema " + schema
	}
	if err := sch.Validate(inst); err != nil {
		return err.Error()
	}
	return ""
}
