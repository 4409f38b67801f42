// Command testreport turns `go test -json` into what a person running the
// suite wants to read: a line as each package starts and ends, a note every
// 30 seconds while nothing happens (the first run compiles Caddy and every
// dependency for minutes), every skipped test with its reason, and for each
// failed test its own output, assertion first. It exits 1 if anything
// failed.
//
//	go test -json ./... | go run ./internal/testreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// report accumulates the events.
type report struct {
	out     io.Writer
	output  map[string][]string // package/test → its output lines
	skipped []string
	failed  []string
	bad     bool
}

func main() {
	r := &report{out: os.Stdout, output: map[string][]string{}}
	events := make(chan event)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var ev event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				// not an event: a build error or a line from go itself
				fmt.Fprintln(r.out, sc.Text())
				r.bad = r.bad || strings.Contains(sc.Text(), "FAIL")
				continue
			}
			events <- ev
		}
	}()
	start := time.Now()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				r.summary(time.Since(start))
				if r.bad {
					os.Exit(1)
				}
				return
			}
			last = time.Now()
			r.add(ev)
		case <-tick.C:
			if time.Since(last) >= 30*time.Second {
				fmt.Fprintf(r.out, "… still working (%s so far; the first run compiles Caddy and every dependency with the race detector)\n",
					time.Since(start).Round(time.Second))
			}
		}
	}
}

// add takes one event.
func (r *report) add(ev event) {
	id := ev.Package + " " + ev.Test
	switch ev.Action {
	case "start":
		fmt.Fprintf(r.out, "▶ %s\n", ev.Package)
	case "output", "build-output":
		r.output[id] = append(r.output[id], ev.Output)
	case "skip":
		if ev.Test == "" {
			return // a package without tests
		}
		r.skipped = append(r.skipped, fmt.Sprintf("%s %s: %s", ev.Package, ev.Test, reason(r.output[id])))
		delete(r.output, id)
	case "pass":
		if ev.Test == "" {
			fmt.Fprintf(r.out, "ok   %s (%.1fs)\n", ev.Package, ev.Elapsed)
		}
		delete(r.output, id)
	case "fail", "build-fail":
		r.bad = true
		if ev.Test == "" {
			fmt.Fprintf(r.out, "FAIL %s (%.1fs)\n", ev.Package, ev.Elapsed)
			// output of the package itself (a panic, a build error)
			if lines := r.output[id]; len(lines) > 0 && !onlyStatus(lines) {
				lines = lines[max(0, len(lines)-maxPackageLines):]
				r.failed = append(r.failed, "=== "+ev.Package+" (its last lines)\n"+strings.Join(lines, ""))
			}
			return
		}
		r.failed = append(r.failed, "=== "+ev.Package+" "+ev.Test+"\n"+strings.Join(r.output[id], ""))
		delete(r.output, id)
	}
}

// maxPackageLines bounds what a failed package's own output (outside any
// test: a panic, a build error, the servers' logs) shows.
const maxPackageLines = 100

// reason is the skip message among a skipped test's output lines: the
// last "file_test.go:N: ..." line (t.Skip's), else every line.
func reason(lines []string) string {
	var msgs []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		msgs = append(msgs, t)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if file, _, ok := strings.Cut(msgs[i], ":"); ok && strings.HasSuffix(file, "_test.go") {
			return msgs[i]
		}
	}
	if len(msgs) == 0 {
		return "(no reason given)"
	}
	return strings.Join(msgs, " / ")
}

// onlyStatus reports whether a package's output is only go test's own
// status lines.
func onlyStatus(lines []string) bool {
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t != "" && t != "FAIL" && t != "PASS" && !strings.HasPrefix(t, "FAIL\t") && !strings.HasPrefix(t, "ok ") && !strings.HasPrefix(t, "coverage:") {
			return false
		}
	}
	return true
}

// summary prints the skips and the failures.
func (r *report) summary(took time.Duration) {
	sort.Strings(r.skipped)
	if len(r.skipped) > 0 {
		fmt.Fprintf(r.out, "\nSkipped (%d):\n", len(r.skipped))
		for _, s := range r.skipped {
			fmt.Fprintln(r.out, "  "+s)
		}
	}
	if len(r.failed) > 0 {
		fmt.Fprintf(r.out, "\nFailed (%d):\n", len(r.failed))
		for _, f := range r.failed {
			fmt.Fprintln(r.out, f)
		}
	}
	verdict := "all tests passed"
	if r.bad {
		verdict = "FAILED"
	}
	fmt.Fprintf(r.out, "\n%s in %s\n", verdict, took.Round(time.Second))
}
