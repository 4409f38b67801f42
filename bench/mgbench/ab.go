package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// abBench compares two builds of the gateway in one run: A, served by the
// -caddy binary, and B, served by the binary other (built from another
// commit), each on its own SQLite ledger made by its own binary's commands
// (so their schemas may differ). Drift on a shared machine hits both
// alike: at c=1 the floor, A and B take turns request by request; at c=50
// they take alternating rounds, and the CPU ratio B÷A is the median of the
// rounds' ratios.
// With profile set, A's CPU profiles of the streamed phases go to that file
// (passed through) and to that file with ".translated" appended.
func (e *env) abBench(other string, d time.Duration, latN, nStreams int, profile string) error {
	// Both sides start alike (the run's own gateway is not used), so that
	// neither is favoured by how its ledger was made, and from a binary of
	// their own: a gateway run from the file the mock and the floor run from
	// shares their code's pages in the processor's caches, which made it
	// ~30 µs faster at c=1 than the same build from another file.
	e.gw.stop()
	binA := filepath.Join(e.dir, "caddy-A")
	if err := copyFile(e.gw.cmd.Path, binA); err != nil {
		return err
	}
	a, err := e.startSide("A", binA)
	if err != nil {
		return err
	}
	defer a.p.stop()
	b, err := e.startSide("B", other)
	if err != nil {
		return err
	}
	defer b.p.stop()
	c50 := newClient(64)
	plain := chat("gpt-4o-mini", "Hello there, how are you today?", false)
	for _, t := range []*target{e.floorT, a.t, b.t} {
		throughput(c50, t, plain, 50, time.Second) // warm up
	}

	// c=50: the plain request, then a stream of 200 tokens sent as fast as
	// the mock makes them (many events a read), passed through and
	// translated, each in alternating rounds
	plainCPU, plainA, plainB := abRounds(c50, a, b, plain, d)
	profDone := startProfile(a.admin, profile, d) // both sides' rounds: d/2 each
	streamCPU, streamA, streamB := abRounds(c50, a, b, chat("gpt-4o-mini", "mock:tokens=200 Hello there", true), d/2)
	waitProfile(profDone)
	// the same stream translated, to an Anthropic client (its events come
	// through the keep-alive pump)
	if profile != "" {
		profDone = startProfile(a.admin, profile+".translated", d)
	}
	translatedCPU, trA, trB := abRounds(c50, a, b, messages("gpt-4o-mini", "mock:tokens=200 Hello there", true), d/2)
	waitProfile(profDone)

	// frame stalls: nStreams streams of 25 ms frames at once, A and B in
	// alternating rounds
	long := chat("gpt-4o-mini", "mock:tokens=60 mock:delay=25ms Hello there", true)
	cs := newClient(nStreams + 16)
	var stalls [2]int
	var gaps [2][]time.Duration
	for _, t := range []*target{a.t, b.t} {
		frameGaps(cs, t, long, nStreams) // warm up: the first burst dials every connection
	}
	for i := range 4 {
		for _, j := range []int{i % 2, 1 - i%2} {
			g, _, _ := frameGaps(cs, []*target{a.t, b.t}[j], long, nStreams)
			stalls[j] += stallsIn(g)
			gaps[j] = append(gaps[j], g...)
		}
	}
	for j := range gaps {
		slices.Sort(gaps[j])
	}

	c1 := newClient(4)
	lat := latencies(c1, []*target{e.floorT, a.t, b.t}, plain, latN)
	ttft := firstTokens(c1, []*target{e.floorT, a.t, b.t}, chat("gpt-4o-mini", "mock:tokens=5 Hello there", true), latN/4)

	fmt.Printf("modelgate A/B, %s: A = %s, B = %s; %d rounds of %s at c=50 (streams: half that), %d requests at c=1\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), e.gw.cmd.Path, other, abRoundsN, d/abRoundsN, latN)
	fmt.Println("| measure | A | B | B − A, B ÷ A |")
	fmt.Println("|---|---|---|---|")
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }
	fmt.Printf("| CPU per request, c=50, pass-through | %s | %s | %s |\n", us(plainA.per()), us(plainB.per()), plainCPU)
	fmt.Printf("| requests/s, c=50 | %.0f | %.0f | %.3f× |\n", plainA.rps(d), plainB.rps(d), plainB.rps(d)/plainA.rps(d))
	fmt.Printf("| CPU per request, c=50, streamed (200 tokens) | %s | %s | %s |\n", us(streamA.per()), us(streamB.per()), streamCPU)
	fmt.Printf("| CPU per request, c=50, streamed to an Anthropic client (200 tokens, translated) | %s | %s | %s |\n", us(trA.per()), us(trB.per()), translatedCPU)
	fmt.Printf("| frame stalls (> 125 ms), 4 rounds of %d streams of 25 ms frames | %d (p99 gap %s) | %d (p99 gap %s) | %+d |\n",
		nStreams, stalls[0], ms(percentile(gaps[0], 99)), stalls[1], ms(percentile(gaps[1], 99)), stalls[1]-stalls[0])
	if countSyscalls {
		for _, m := range []struct {
			what string
			a, b tally
		}{{"pass-through", plainA, plainB}, {"streamed", streamA, streamB}, {"streamed, translated", trA, trB}} {
			fmt.Printf("| system calls per request, c=50, %s | %s | %s | |\n", m.what, m.a.callsPer(), m.b.callsPer())
		}
	}
	fmt.Printf("| ledger: settles per write transaction (mean) | %.1f | %.1f | |\n", a.settlesPerCommit(), b.settlesPerCommit())
	for _, m := range []struct {
		what string
		got  map[string][]time.Duration
		p    float64
	}{{"added latency p50, c=1", lat, 50}, {"added latency p90, c=1", lat, 90}, {"added time to first token p50, c=1", ttft, 50}} {
		floor := percentile(m.got["floor"], m.p)
		ga, gb := percentile(m.got["A"], m.p)-floor, percentile(m.got["B"], m.p)-floor
		fmt.Printf("| %s (floor %s) | %s | %s | %s |\n", m.what, ms(floor), added(ga), added(gb), added(gb-ga))
	}
	return nil
}

// abRoundsN is the number of c=50 rounds an A/B phase alternates.
const abRoundsN = 8

// abRounds runs r at c=50 on a and b in alternating rounds (d in all per
// side) and returns the CPU ratio B÷A (the median of the rounds' ratios,
// and their range) and each side's totals.
func abRounds(c50 *http.Client, a, b *abSide, r request, d time.Duration) (cpu string, ta, tb tally) {
	var ratios []float64
	for i := range abRoundsN {
		first, second := a, b
		if i%2 == 1 {
			first, second = b, a
		}
		first.last.round(c50, first.p, first.t, r, d/abRoundsN)
		second.last.round(c50, second.p, second.t, r, d/abRoundsN)
		ratios = append(ratios, float64(b.last.per())/float64(a.last.per()))
		ta.add(a.last)
		tb.add(b.last)
		a.last, b.last = tally{}, tally{}
	}
	slices.Sort(ratios)
	return fmt.Sprintf("%.3f× (median of rounds %.3f–%.3f)", ratios[abRoundsN/2], ratios[0], ratios[abRoundsN-1]), ta, tb
}

// abSide is one gateway of an A/B run and its last c=50 round.
type abSide struct {
	p     *proc
	t     *target
	admin string // its admin endpoint (metrics)
	last  tally
}

// settlesPerCommit is the mean batch of the gateway's ledger so far.
func (s *abSide) settlesPerCommit() float64 {
	sum, n := metric(s.admin, "modelgate_ledger_commit_commands_sum"), metric(s.admin, "modelgate_ledger_commit_commands_count")
	return sum / max(n, 1)
}

// startSide makes a ledger with bin's own commands (an account with the
// run's credit, and its key) and starts bin's gateway on it.
func (e *env) startSide(name, bin string) (*abSide, error) {
	db := filepath.Join(e.dir, "ledger-"+name+".db")
	run := func(args ...string) (string, error) {
		out, err := exec.Command(bin, append([]string{"modelgate"}, args...)...).Output()
		if err != nil {
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				return "", fmt.Errorf("%s modelgate %s: %w: %s", bin, args[0], err, ee.Stderr)
			}
			return "", err
		}
		return strings.TrimSpace(string(out)), nil
	}
	account, err := run("account", "create", "--db", db, "--create-ledger", "--email", "bench-"+name+"@example.com", "--credit", credit)
	if err != nil {
		return nil, err
	}
	key, err := run("key", "create", "--db", db, "--account", account, "--label", "bench")
	if err != nil {
		return nil, err
	}
	port, adminPort := freePort(), freePort()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p, err := startCaddy(bin, e.dir, "gateway-"+name, e.gwConfig(fmt.Sprintf("admin 127.0.0.1:%d", adminPort), "ledger sqlite "+db, port), base+"/")
	if err != nil {
		return nil, err
	}
	return &abSide{p: p, admin: fmt.Sprintf("http://127.0.0.1:%d", adminPort), t: &target{name: name, base: base, headers: []string{"Authorization", "Bearer " + key}, gateway: true}}, nil
}

// copyFile copies the executable src to dst.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
