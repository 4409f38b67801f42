package anthropic

import (
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
)

func TestAppendErrorGolden(t *testing.T) {
	var out []byte
	for _, e := range []*formats.Error{
		invalid("max_tokens", "Field required"),
		{Kind: formats.KindInvalidRequest, Message: "bad \"quote\" é", Param: "messages.0.role", RequestID: "req_0123456789abcdef"},
		formats.NewError(formats.KindAuthentication, ""),
		formats.NewError(formats.KindAccountSuspended, "This account is suspended."),
		formats.NewError(formats.KindInsufficientQuota, "Your balance is too low for this request."),
		formats.NewError(formats.KindPermissionDenied, "Country, region, or territory not supported"),
		formats.NewError(formats.KindNotFound, "model: unknown-model"),
		formats.NewError(formats.KindMethodNotAllowed, "This route accepts POST only."),
		formats.NewError(formats.KindRequestTooLarge, ""),
		{Kind: formats.KindRateLimited, Message: "Rate limit reached: 60 requests per minute.", RetryAfter: 12},
		formats.NewError(formats.KindInternal, ""),
		formats.NewError(formats.KindUpstream, "The upstream provider failed."),
		formats.NewError(formats.KindOverloaded, ""),
		formats.NewError(formats.KindTimeout, "The upstream provider timed out."),
	} {
		line := AppendError(nil, e)
		if !jsontext.Value(line).IsValid() {
			t.Fatalf("invalid %s", line)
		}
		out = append(out, strconv.Itoa(Status(e))+" "...)
		out = append(out, line...)
		out = append(out, '\n')
	}
	golden(t, "errors.golden", out)
}

func TestParseUpstreamError(t *testing.T) {
	long := `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`
	for _, tc := range []struct {
		status int
		body   string
		kind   formats.ErrorKind
		param  string
		keep   string // a part of the message that must survive
	}{
		{400, long, formats.KindInvalidRequest, "", "prompt is too long"},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0.tool_use_id: Field required"}}`, formats.KindInvalidRequest, "messages.1.content.0.tool_use_id", "Field required"},
		{400, `not json`, formats.KindInvalidRequest, "", "rejected"},
		{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-api03-AbCdEf0123456789"}}`, formats.KindUpstream, "", "credentials"},
		{402, `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low"}}`, formats.KindUpstream, "", "402"},
		{403, `{"type":"error","error":{"type":"permission_error","message":"no"}}`, formats.KindUpstream, "", "403"},
		{404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}`, formats.KindUpstream, "", "404"},
		{413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}`, formats.KindRequestTooLarge, "", "maximum size"},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, formats.KindOverloaded, "", "overloaded"},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, formats.KindOverloaded, "", "overloaded"},
		{503, ``, formats.KindOverloaded, "", "overloaded"},
		{504, `<html>`, formats.KindTimeout, "", "timed out"},
		{500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, formats.KindUpstream, "", "500"},
		{200, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, formats.KindOverloaded, "", "Overloaded"},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			e := ParseUpstreamError(tc.status, []byte(tc.body))
			if e.Kind != tc.kind || e.Param != tc.param {
				t.Fatalf("got %+v", e)
			}
			if !strings.Contains(e.Message, tc.keep) {
				t.Fatalf("message %q lacks %q", e.Message, tc.keep)
			}
			for _, secret := range []string{"011CSHoEeqs5C35K2UUqR7Fy", "sk-ant", "AbCdEf0123456789"} {
				if strings.Contains(e.Message, secret) {
					t.Fatalf("secret kept: %s", e.Message)
				}
			}
		})
	}
}

func TestCountTokensResponse(t *testing.T) {
	if got := string(AppendCountTokensResponse(nil, 14)); got != `{"input_tokens":14}` {
		t.Fatal(got)
	}
	if n, err := ParseCountTokensResponse([]byte(` {"input_tokens": 2095} `)); err != nil || n != 2095 {
		t.Fatalf("%d %v", n, err)
	}
	for _, body := range []string{`{}`, `{"input_tokens":-1}`, `{"input_tokens":"3"}`, `x`} {
		if _, err := ParseCountTokensResponse([]byte(body)); err == nil || err.Kind != formats.KindUpstream {
			t.Errorf("%s: %v", body, err)
		}
	}
	if _, err := ParseCountTokensResponse([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)); err == nil || err.Kind != formats.KindOverloaded {
		t.Errorf("error body: %v", err)
	}
}
