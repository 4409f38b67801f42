package openai

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
)

func TestAppendErrorGolden(t *testing.T) {
	var out []byte
	for _, e := range []*formats.Error{
		formats.InvalidRequest("temperature", "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead."),
		{Kind: formats.KindInvalidRequest, Message: "bad \"quote\" é", Code: "invalid_value", Param: "messages[0].role"},
		formats.NewError(formats.KindAuthentication, "Incorrect API key provided."),
		formats.NewError(formats.KindAccountSuspended, "This account is suspended."),
		formats.NewError(formats.KindInsufficientQuota, "Your balance is too low for this request."),
		{Kind: formats.KindPermissionDenied, Message: "Country, region, or territory not supported", Code: "unsupported_country_region_territory"},
		{Kind: formats.KindNotFound, Message: "The model 'x' does not exist.", Param: "model"},
		formats.NewError(formats.KindMethodNotAllowed, "This route accepts POST only."),
		formats.NewError(formats.KindRequestTooLarge, "The request body is over 32 MiB."),
		{Kind: formats.KindRateLimited, Message: "Rate limit reached: 60 requests per minute.", RetryAfter: 12},
		formats.NewError(formats.KindInternal, ""),
		formats.NewError(formats.KindUpstream, "The upstream provider failed."),
		formats.NewError(formats.KindOverloaded, "The upstream provider is overloaded; retry later."),
		formats.NewError(formats.KindTimeout, "The upstream provider timed out."),
	} {
		line := AppendError(nil, e)
		if !jsontext.Value(line).IsValid() {
			t.Fatalf("invalid %s", line)
		}
		out = append(out, strconv.Itoa(e.Status())+" "...)
		out = append(out, line...)
		out = append(out, '\n')
	}
	golden(t, "errors.golden", out)
}

func TestParseUpstreamError(t *testing.T) {
	ctx := `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	key := `{"error":{"message":"Incorrect API key provided: sk-proj-********************************************abcd. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	for _, tc := range []struct {
		status int
		body   string
		kind   formats.ErrorKind
		param  string
		code   string
	}{
		{400, ctx, formats.KindInvalidRequest, "messages", "context_length_exceeded"},
		{422, `{"error":{"message":"bad","type":"invalid_request_error"}}`, formats.KindInvalidRequest, "", ""},
		{400, `not json`, formats.KindInvalidRequest, "", ""},
		{401, key, formats.KindUpstream, "", ""},
		{403, `{"error":{"message":"Country not supported","type":"request_forbidden"}}`, formats.KindUpstream, "", ""},
		{404, `{"error":{"message":"The model 'gpt-9' does not exist","type":"invalid_request_error","code":"model_not_found"}}`, formats.KindUpstream, "", ""},
		{408, ``, formats.KindTimeout, "", ""},
		{504, `<html>gateway timeout</html>`, formats.KindTimeout, "", ""},
		{413, `{"error":{"message":"Request too large"}}`, formats.KindRequestTooLarge, "", ""},
		{429, `{"error":{"message":"Rate limit reached for gpt-4o in organization org-AbCdEf123 on tokens per min","type":"tokens","code":"rate_limit_exceeded"}}`, formats.KindOverloaded, "", ""},
		{429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, formats.KindOverloaded, "", ""},
		{503, `{"error":"overloaded"}`, formats.KindOverloaded, "", ""},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, formats.KindOverloaded, "", ""},
		{500, `{"error":{"message":"The server had an error (req_123abcXYZ)","type":"server_error"}}`, formats.KindUpstream, "", ""},
		{502, ``, formats.KindUpstream, "", ""},
		{409, `{}`, formats.KindUpstream, "", ""},
	} {
		e := ParseUpstreamError(tc.status, []byte(tc.body))
		if e.Kind != tc.kind || e.Param != tc.param || e.Code != tc.code {
			t.Errorf("%d %s: got %v %q %q (%s)", tc.status, tc.body, e.Kind.Status(), e.Param, e.Code, e.Message)
		}
		if e.Status() == 401 {
			t.Errorf("%d: 401 to the client", tc.status)
		}
		for _, secret := range []string{"sk-", "abcd.", "org-", "req_", "AbCdEf"} {
			if strings.Contains(e.Message, secret) {
				t.Errorf("%d: %q leaks %q", tc.status, e.Message, secret)
			}
		}
		env := AppendError(nil, e)
		if !jsontext.Value(env).IsValid() || !bytes.Contains(env, []byte(`"param":`)) {
			t.Errorf("envelope %s", env)
		}
	}
	if e := ParseUpstreamError(400, []byte(ctx)); !strings.Contains(e.Message, "maximum context length") {
		t.Errorf("context message lost: %s", e.Message)
	}
}
