package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// soak runs mixed load (three client formats, three upstream formats,
// streamed and not) for d and prints the gateway's RSS and goroutine count
// at intervals; they should stay flat. It ends with the lost-debit check.
func (e *env) soak(d time.Duration) error {
	models := []string{"gpt-4o-mini", e.gwAnthropic, e.gwGemini}
	var shapes []request
	for _, m := range models {
		for _, stream := range []bool{false, true} {
			text := "mock:tokens=30 mock:delay=5ms soak test"
			if !stream {
				text = "mock:tokens=30 soak test"
			}
			shapes = append(shapes, chat(m, text, stream), messages(m, text, stream), gemini(m, text, stream))
		}
	}
	c := newClient(64)
	var sent, failed atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(end); i++ {
				if e.gwT.do(c, shapes[i%len(shapes)]) {
					sent.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	every := max(d/20, 5*time.Second)
	fmt.Println("| elapsed | answers | failed | RSS MiB | Go heap MiB | goroutines |")
	fmt.Println("|---|---|---|---|---|---|")
	start := time.Now()
	report := func() {
		fmt.Printf("| %s | %d | %d | %.1f | %.1f | %d |\n", time.Since(start).Round(time.Second), sent.Load(), failed.Load(),
			float64(e.gw.rss())/(1<<20), float64(e.heapInuse())/(1<<20), e.goroutines())
	}
	report()
	for tick := time.NewTicker(every); time.Now().Before(end); {
		<-tick.C
		report()
	}
	wg.Wait()
	time.Sleep(2 * time.Second) // idle connections settle
	report()
	e.gw.stop()
	lost, audit, err := lostDebits(ledger.Options{Path: e.db}, e.account, e.key, e.gwT.answered.Load())
	if err != nil {
		return err
	}
	fmt.Printf("\nlost debits: %d; balance vs credits − debits: %s\n", lost, audit)
	return nil
}

// heapInuse reads the gateway's Go heap in use (RSS also holds SQLite's
// page cache, which fills up to its configured size as the ledger grows).
func (e *env) heapInuse() uint64 {
	m, _ := memstats(e.adminURL)
	return m.HeapInuse
}

// liveGoMemory returns the Go memory a Caddy process holds right after a
// collection: its heap objects and goroutine stacks. The admin endpoint's
// heap profile with gc=1 runs the collection.
func liveGoMemory(admin string) (int64, error) {
	resp, err := http.Get(admin + "/debug/pprof/heap?gc=1")
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	m, err := memstats(admin)
	return int64(m.HeapAlloc + m.StackInuse), err
}

// goMemStats are the runtime.MemStats fields the bench reads.
type goMemStats struct{ HeapInuse, HeapAlloc, StackInuse uint64 }

// memstats reads a Caddy process's memory statistics from its admin expvar.
func memstats(admin string) (goMemStats, error) {
	var v struct{ Memstats goMemStats }
	resp, err := http.Get(admin + "/debug/vars")
	if err != nil {
		return v.Memstats, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return v.Memstats, fmt.Errorf("%s/debug/vars: %w", admin, err)
	}
	return v.Memstats, nil
}

// goroutines reads the gateway's goroutine count from Caddy's admin pprof.
func (e *env) goroutines() int {
	resp, err := http.Get(e.adminURL + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "goroutine profile: total")))
	return n
}
