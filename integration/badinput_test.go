package integration

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// badRoute is a route and a valid body for it, the seed of its mutations.
type badRoute struct {
	method, path, body string
	headers            []string
	generates          bool // a 200 from it is billed
}

func badRoutes(key string) []badRoute {
	bearer := []string{"Authorization", "Bearer " + key}
	anth := []string{"X-Api-Key", key, "Anthropic-Version", "2023-06-01"}
	goog := []string{"X-Goog-Api-Key", key}
	gem := `{"contents":[{"role":"user","parts":[{"text":"hi there"}]}],"generationConfig":{"maxOutputTokens":20,"temperature":0.5}}`
	var out []badRoute
	for _, m := range everyUpstream {
		out = append(out,
			badRoute{"POST", "/v1/chat/completions", `{"model":"` + m + `","max_tokens":20,"stream":false,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi there"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`, bearer, true},
			badRoute{"POST", "/v1/chat/completions", `{"model":"` + m + `","max_tokens":20,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi there"}]}`, bearer, true},
			badRoute{"POST", "/v1/responses", `{"model":"` + m + `","max_output_tokens":20,"store":false,"instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"hi there"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`, bearer, true},
			badRoute{"POST", "/v1/responses", `{"model":"` + m + `","max_output_tokens":20,"stream":true,"input":"hi there"}`, bearer, true},
			badRoute{"POST", "/v1/messages", `{"model":"` + m + `","max_tokens":20,"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"yo"},{"role":"user","content":"again"}]}`, anth, true},
			badRoute{"POST", "/v1/messages", `{"model":"` + m + `","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"hi there"}]}`, anth, true},
			badRoute{"POST", "/v1/messages/count_tokens", `{"model":"` + m + `","messages":[{"role":"user","content":"hi there"}]}`, anth, false},
			badRoute{"POST", "/v1beta/models/" + m + ":generateContent", gem, goog, true},
			badRoute{"POST", "/v1beta/models/" + m + ":streamGenerateContent?alt=sse", gem, goog, true},
			badRoute{"POST", "/v1beta/models/" + m + ":countTokens", `{"contents":[{"parts":[{"text":"hi"}]}]}`, goog, false},
			badRoute{"POST", "/v1/images/generations", `{"model":"` + m + `","prompt":"hi there","n":1,"size":"1024x1024","stream":false}`, bearer, true},
			badRoute{"POST", "/v1/images/edits", "--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n" + m +
				"\r\n--XyZ\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nhi there\r\n--XyZ\r\n" +
				"Content-Disposition: form-data; name=\"image[]\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n\x1a\n" +
				"\r\n--XyZ--\r\n", append([]string{"Content-Type", "multipart/form-data; boundary=XyZ"}, bearer...), true},
		)
	}
	return append(out,
		badRoute{"GET", "/api/usage", "", bearer, false},
		badRoute{"GET", "/v1/models", "", bearer, false},
		badRoute{"GET", "/v1beta/models", "", goog, false},
	)
}

// badInputRegressions are damaged requests that once broke the gateway,
// sent on every run before the random ones.
func badInputRegressions(key string) []badRoute {
	bearer := []string{"Authorization", "Bearer " + key}
	anth := []string{"X-Api-Key", key, "Anthropic-Version", "2023-06-01"}
	goog := []string{"X-Goog-Api-Key", key}
	// 20,000 long unknown fields: the dropped header once grew to a megabyte
	var many strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&many, `"an_unknown_field_with_a_long_name_%05d":1,`, i)
	}
	out := []badRoute{
		// BADINPUT_SEED=1795610629737214171: a DEL in an unknown
		// field name was echoed in x-modelgate-dropped, a malformed header
		// the client could not read
		{"POST", "/v1/responses", "{\"model\":\"claude-test\",\"max_out\x7fut_tokens\":20,\"stream\":true,\"input\":\"hi there\"}", bearer, true},
	}
	for _, m := range everyUpstream {
		out = append(out,
			badRoute{"POST", "/v1/chat/completions", `{"model":"` + m + `","max_tokens":20,"se\u0000ed\r\n":1,"x\u2028y":2,"caf\u00e9":3,` + many.String() + `"messages":[{"role":"user","content":"hi"}]}`, bearer, true},
			badRoute{"POST", "/v1/messages", `{"model":"` + m + `","max_tokens":20,"a\u001bb":1,"\u007f":2,` + many.String() + `"messages":[{"role":"user","content":"hi"}]}`, anth, true},
			badRoute{"POST", "/v1beta/models/" + m + ":generateContent", `{"tab\tname":1,` + many.String() + `"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":20,"ne\nw":1}}`, goog, true},
		)
	}
	return out
}

// mutate returns a damaged copy of a valid body: truncated, bytes flipped
// or inserted (invalid UTF-8 included), a value given the wrong type, a
// structure nested too deep, a field made huge, numbers out of range.
func mutate(rng *rand.Rand, body string) string {
	if body == "" {
		body = "{}"
	}
	switch rng.IntN(12) {
	case 0: // truncated
		return body[:rng.IntN(len(body))]
	case 1: // a byte replaced
		b := []byte(body)
		b[rng.IntN(len(b))] = byte(rng.IntN(256))
		return string(b)
	case 2: // invalid UTF-8 inside a string or anywhere
		i := rng.IntN(len(body))
		return body[:i] + string([]byte{0xff, 0xfe, 0xc3}) + body[i:]
	case 3: // a value of the wrong type
		wrong := []string{`5`, `"x"`, `[]`, `{}`, `null`, `true`, `-1`, `1e400`, `[{"a":1}]`, `"\u0000"`}
		for _, field := range []string{`"model":`, `"messages":`, `"max_tokens":`, `"content":`, `"contents":`, `"parts":`, `"text":`, `"role":`, `"stream":`, `"tools":`, `"generationConfig":`, `"system":`} {
			if i := strings.Index(body, field); i >= 0 && rng.IntN(2) == 0 {
				rest := body[i+len(field):]
				end := valueEnd(rest)
				return body[:i+len(field)] + wrong[rng.IntN(len(wrong))] + rest[end:]
			}
		}
		return `{"model":` + wrong[rng.IntN(len(wrong))] + `}`
	case 4: // deep nesting
		n := 1000 + rng.IntN(20000)
		return strings.Repeat("[", n) + strings.Repeat("]", n)
	case 5: // a huge string field
		return strings.Replace(body, "hi", strings.Repeat("é\u2028", 1<<14+rng.IntN(1<<16)), 1)
	case 6: // huge or negative numbers
		return strings.NewReplacer(":20", ":"+[]string{"-5", "0", "99999999999999999999", "1.5", "1e9"}[rng.IntN(5)], ":0.5", ":NaN").Replace(body)
	case 7: // not JSON at all
		return []string{"", "null", "[]", `"str"`, "<xml/>", "\x00\x01\x02", "{", "}", `{"a":}`, "\xef\xbb\xbf{}"}[rng.IntN(10)]
	case 8: // duplicate keys, trailing garbage
		return strings.Replace(body, "{", `{"model":"other","model":1,`, 1) + "garbage"
	case 9: // many messages
		return strings.Replace(body, `"messages":[`, `"messages":[`+strings.Repeat(`{"role":"user","content":"x"},`, 500+rng.IntN(2000)), 1)
	case 10: // unknown roles and part types
		return strings.NewReplacer(`"user"`, `"wizard"`, `"text"`, `"hologram"`).Replace(body)
	}
	// several bytes removed
	i := rng.IntN(len(body))
	return body[:i] + body[min(len(body), i+1+rng.IntN(8)):]
}

// valueEnd returns the length of the JSON value s starts with, roughly (to
// the next comma or closing bracket at depth 0).
func valueEnd(s string) int {
	depth, inStr := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			if depth == 0 {
				return i
			}
			depth--
		case c == ',' && depth == 0:
			return i
		}
	}
	return len(s)
}

// TestBadInputAtVolume sends thousands of damaged requests to every route
// (BADINPUT_N, default 1500; the seed is logged and BADINPUT_SEED replays
// one run), plus bodies over the size limit and bodies that trickle in. The
// gateway answers every one with a status below 500 in the route's format,
// debits nothing for any request it refuses (every debit has its usage row,
// one per 200 of a generation route), and its heap stays bounded.
func TestBadInputAtVolume(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("100.00")
	routes := badRoutes(key)
	n := 1500
	if s := os.Getenv("BADINPUT_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BADINPUT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (BADINPUT_SEED replays it)", seed)

	var peakHeap atomic.Uint64
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap := ms.HeapInuse
	stopSampler := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
			select {
			case <-stopSampler:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	var mu sync.Mutex
	var failures []string
	statuses := map[int]int{}
	billed := 0 // 200s of generation routes
	send := func(rt badRoute, body io.Reader, size int64, label string) {
		req, _ := http.NewRequest(rt.method, gatewayAddr+rt.path, body)
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(rt.headers); i += 2 {
			req.Header.Set(rt.headers[i], rt.headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			mu.Lock()
			failures = append(failures, fmt.Sprintf("%s %s (%s): %v", rt.method, rt.path, label, err))
			mu.Unlock()
			return
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		statuses[resp.StatusCode]++
		if rt.generates && resp.StatusCode == 200 {
			billed++
		}
		if d := resp.Header.Get("X-Modelgate-Dropped"); len(d) > 1024 || strings.ContainsFunc(d, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			failures = append(failures, fmt.Sprintf("%s %s (%s): x-modelgate-dropped of %d bytes: %.200q", rt.method, rt.path, label, len(d), d))
		}
		switch {
		case err != nil:
			failures = append(failures, fmt.Sprintf("%s %s (%s): reading the answer: %v", rt.method, rt.path, label, err))
		case resp.StatusCode >= 500:
			failures = append(failures, fmt.Sprintf("%s %s (%s): %d %.300s", rt.method, rt.path, label, resp.StatusCode, out))
		case resp.StatusCode >= 400 && !bytes.Contains(out, []byte(`"error"`)):
			failures = append(failures, fmt.Sprintf("%s %s (%s): %d without an error envelope: %.300s", rt.method, rt.path, label, resp.StatusCode, out))
		}
	}

	// bodies that once broke the gateway, on every run
	for _, rt := range badInputRegressions(key) {
		send(rt, strings.NewReader(rt.body), int64(len(rt.body)), fmt.Sprintf("regression %.80q", rt.body))
	}

	// damaged bodies, 8 at a time
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for range jobs {
				rt := routes[rng.IntN(len(routes))]
				if rt.method == "GET" {
					rt.method = []string{"GET", "POST", "PUT", "DELETE"}[rng.IntN(4)]
				}
				body := mutate(rng, rt.body)
				send(rt, strings.NewReader(body), int64(len(body)), fmt.Sprintf("%.80q", body))
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	// bodies over the 32 MiB limit, declared or not, four at a time
	over := int64(33 << 20)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt := routes[i%len(routes)]
			size := over
			if i%2 == 1 {
				size = -1 // chunked: the limit is found while reading
			}
			send(rt, io.LimitReader(zeroReader{}, over), size, "over the limit")
		}()
	}
	// bodies that trickle in, a byte every 20 ms
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt := routes[i]
			send(rt, &slowReader{data: []byte(rt.body[:min(len(rt.body), 60)]), every: 20 * time.Millisecond}, -1, "slow body")
		}()
	}
	wg.Wait()
	close(stopSampler)
	<-sampled

	for i, f := range failures {
		if i == 20 {
			t.Errorf("… %d more", len(failures)-20)
			break
		}
		t.Error(f)
	}
	rows := g.rows(acct)
	bal, held := g.balance(acct)
	var debits ledger.Money
	for _, r := range rows {
		debits += r.Charged
	}
	funded, _ := ledger.ParseMoney("100.00")
	growth := int64(peakHeap.Load()) - int64(baseHeap)
	t.Logf("%d damaged requests: statuses %v; %d billed answers, %d rows, debits %s; heap peak %d MiB over a base of %d MiB",
		n, statuses, billed, len(rows), debits, growth>>20, baseHeap>>20)
	if len(rows) != billed || bal != funded-debits || held != 0 {
		t.Errorf("%d usage rows for %d billed answers; balance %s, debits %s, held %s", len(rows), billed, bal, debits, held)
	}
	// a body is read whole (at most 32 MiB) and parsed: eight in flight
	// must stay well under a gigabyte
	if growth > 768<<20 {
		t.Errorf("the heap grew by %d MiB", growth>>20)
	}
	g.audit()
}

// zeroReader reads spaces (a body of whitespace that never ends).
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// slowReader yields one byte of data per interval.
type slowReader struct {
	data  []byte
	every time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.every)
	p[0] = s.data[0]
	s.data = s.data[1:]
	return 1, nil
}
