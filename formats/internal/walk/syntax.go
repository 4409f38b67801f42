package walk

import (
	"errors"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// SyntaxError explains why body, which failed validation, is not one JSON
// value: a *jsontext.SyntacticError where the decoder can say where, else
// another error.
func SyntaxError(body []byte) error {
	d := jsontext.NewDecoder(strings.NewReader(string(body)))
	_, err := d.ReadValue()
	if err == nil {
		_, err = d.ReadToken()
		if err == nil {
			err = errors.New("trailing data after the JSON value")
		}
	}
	return err
}

// PointerParam renders a JSON pointer (/messages/0/content) in the
// Brackets style (messages[0].content).
func PointerParam(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}
