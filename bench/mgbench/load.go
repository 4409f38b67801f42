package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// target is where a request goes: the upstream directly, the floor (plain
// reverse_proxy) or the gateway.
type target struct {
	name    string
	base    string
	headers []string // name, value pairs
	gateway bool     // its 200s must each have a usage row
	// answered counts its complete 200 answers, for the lost-debit check
	answered atomic.Int64
}

func newClient(conns int) *http.Client {
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, DisableCompression: true, IdleConnTimeout: time.Minute}}
}

// request is a prepared request: its path and body.
type request struct {
	path string
	body []byte
	hdr  []string
}

// chat is an OpenAI chat completion request.
func chat(model, text string, stream bool) request {
	return request{path: "/v1/chat/completions",
		body: fmt.Appendf(nil, `{"model":%q,"stream":%v,"messages":[{"role":"user","content":%q}]}`, model, stream, text)}
}

// messages is an Anthropic messages request.
func messages(model, text string, stream bool) request {
	return request{path: "/v1/messages", hdr: []string{"Anthropic-Version", "2023-06-01"},
		body: fmt.Appendf(nil, `{"model":%q,"max_tokens":1024,"stream":%v,"messages":[{"role":"user","content":%q}]}`, model, stream, text)}
}

// gemini is a Gemini generateContent request.
func gemini(model, text string, stream bool) request {
	method := "generateContent"
	if stream {
		method = "streamGenerateContent?alt=sse"
	}
	return request{path: "/v1beta/models/" + model + ":" + method,
		body: fmt.Appendf(nil, `{"contents":[{"role":"user","parts":[{"text":%q}]}]}`, text)}
}

func (t *target) newRequest(r request) *http.Request {
	req, _ := http.NewRequest("POST", t.base+r.path, bytes.NewReader(r.body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(t.headers); i += 2 {
		req.Header.Set(t.headers[i], t.headers[i+1])
	}
	for i := 0; i+1 < len(r.hdr); i += 2 {
		req.Header.Set(r.hdr[i], r.hdr[i+1])
	}
	return req
}

// do sends one request and reads the whole answer; it reports whether it
// was a complete 200.
func (t *target) do(c *http.Client, r request) bool {
	resp, err := c.Do(t.newRequest(r))
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	ok := err == nil && resp.StatusCode == 200
	if ok && t.gateway {
		t.answered.Add(1)
	}
	return ok
}

// throughput sends r from conns connections for d and returns the complete
// answers and the failures.
func throughput(c *http.Client, t *target, r request, conns int, d time.Duration) (ok, failed int64) {
	var okN, failN atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if t.do(c, r) {
					okN.Add(1)
				} else {
					failN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return okN.Load(), failN.Load()
}

// latencies sends n requests to each target in turn, one at a time, and
// returns each target's durations, sorted. The order is shuffled each
// time, so that every target follows every other (and its leftover work)
// equally often.
func latencies(c *http.Client, ts []*target, r request, n int) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	for range n {
		for _, j := range rand.Perm(len(ts)) {
			t := ts[j]
			start := time.Now()
			if t.do(c, r) {
				out[t.name] = append(out[t.name], time.Since(start))
			}
		}
	}
	for _, d := range out {
		slices.Sort(d)
	}
	return out
}

// firstTokens streams r from each target in turn, n times, one stream at
// a time in a shuffled order (as latencies), and returns each target's
// times to the first token, sorted.
func firstTokens(c *http.Client, ts []*target, r request, n int) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	for range n {
		for _, j := range rand.Perm(len(ts)) {
			t := ts[j]
			if d, _, ok := t.stream(c, r, nil); ok {
				out[t.name] = append(out[t.name], d)
			}
		}
	}
	for _, d := range out {
		slices.Sort(d)
	}
	return out
}

// stream sends a streamed request and returns the time to the first token
// (the first event carrying the mock's first word) and the gaps between the
// events that follow it.
func (t *target) stream(c *http.Client, r request, firstToken chan<- struct{}) (ttft time.Duration, gaps []time.Duration, ok bool) {
	start := time.Now()
	resp, err := c.Do(t.newRequest(r))
	if err != nil {
		return 0, nil, false
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	var last time.Time
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			ok = err == io.EOF && resp.StatusCode == 200 && ttft > 0
			if ok && t.gateway {
				t.answered.Add(1)
			}
			return ttft, gaps, ok
		}
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		now := time.Now()
		if ttft == 0 {
			if !bytes.Contains(line, []byte("Lorem")) {
				continue
			}
			ttft = now.Sub(start)
			if firstToken != nil {
				firstToken <- struct{}{}
			}
		} else {
			gaps = append(gaps, now.Sub(last))
		}
		last = now
	}
}

// percentile returns the p-th percentile (0–100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}
