// Command mgbench measures modelgate against plain Caddy reverse_proxy in
// one run: it starts the mock upstream, a Caddy that only reverse-proxies
// to it (the floor: plain reverse_proxy with Caddy's defaults; a second
// floor with modelgate's upstream pool of 1024 idle connections per host
// shows how much of the difference that pool makes) and modelgate in front of it (each its own process, so
// that CPU and memory are read per process from /proc), drives them with
// the same requests, and prints one table in which every gateway figure is
// also a ratio to the floor. Every gateway request carries auth, hold,
// debit and a usage row; at the end the ledger is checked for lost debits.
//
// bench/run builds the binaries and runs it; bench/soak runs its soak mode.
//
//	mgbench -caddy PATH [-d 8s] [-n 2000] [-streams 512] [-rss-streams 200] [-profile FILE]
//	mgbench -caddy PATH -soak 10m
//	mgbench -caddy PATH -ab OTHER [-d 8s] [-n 2000]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the usage totals

	"github.com/modelgate/modelgate/ledger"
)

const (
	mockKey = "mock-upstream-key"
	credit  = "1000000.00"
)

func main() {
	caddyBin := flag.String("caddy", "bench/out/caddy", "the Caddy binary with modelgate")
	outDir := flag.String("out", "bench/out", "where the run's files go")
	dur := flag.Duration("d", 16*time.Second, "time spent at c=50 on each of: the floor, the pooled floor, the gateway passing through, the gateway translating")
	latN := flag.Int("n", 2000, "requests per target in the c=1 latency phase")
	streams := flag.Int("streams", 512, "concurrent streams in the stall phase")
	rssStreams := flag.Int("rss-streams", 200, "open streams in the memory phase")
	profile := flag.String("profile", "", "write a CPU profile of the gateway (with -only-postgres: the one on PostgreSQL; with -ab: A, during the streamed phases, the translated one to FILE.translated) during the c=50 phase to this file")
	soak := flag.Duration("soak", 0, "instead of the benchmark, run mixed load this long and print RSS and goroutines")
	postgres := flag.String("postgres", os.Getenv("MODELGATE_BENCH_POSTGRES"), "also measure a gateway on this PostgreSQL ledger (an empty database or schema: postgres://…)")
	onlyPostgres := flag.Bool("only-postgres", false, "with -postgres: measure only the floor and the gateway on PostgreSQL at c=50 (quicker, for work on that ledger)")
	ab := flag.String("ab", "", "instead of the benchmark, compare the gateway of -caddy (A) with that of this Caddy binary (B, another build), interleaved")
	flag.BoolVar(&countSyscalls, "syscalls", false, "also count the system calls per request of each c=50 round (with perf; each round takes 0.2 s longer)")
	flag.Parse()

	env, err := setup(*caddyBin, *outDir, *postgres)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mgbench:", err)
		os.Exit(1)
	}
	defer env.close()
	switch {
	case *soak > 0:
		err = env.soak(*soak)
	case *ab != "":
		err = env.abBench(*ab, *dur, *latN, *streams, *profile)
	case *onlyPostgres && env.pgT != nil:
		err = env.benchPostgres(*dur, *profile)
	default:
		err = env.bench(*dur, *latN, *streams, *rssStreams, *profile)
	}
	if err != nil {
		env.close() // os.Exit runs no deferred calls
		fmt.Fprintln(os.Stderr, "mgbench:", err)
		os.Exit(1)
	}
}

// env is a run's three processes and targets.
type env struct {
	dir                      string
	db, account              string
	mock, floor, pooled, gw  *proc
	direct, floorT, pooledT  *target
	gwT                      *target
	gwAnthropic, gwGemini    string // models routed to those upstream formats
	adminURL, pgAdminURL     string // the gateways' admin endpoints (pprof, metrics)
	floorAdminURL            string // the floor's (its Go memory)
	mockURL, floorURL, gwURL string
	pooledURL                string

	// gwConfig is a gateway's Caddyfile: its admin line, ledger line and port
	gwConfig func(admin, ledgerLine string, port int) string

	// the same gateway on a PostgreSQL ledger, when one is given
	key                     string
	pgDSN, pgAccount, pgKey string
	pg                      *proc
	pgT                     *target
}

func setup(bin, out, pgDSN string) (*env, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(out, "run-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, db: filepath.Join(dir, "ledger.db"), gwAnthropic: "claude-bench", gwGemini: "gemini-bench", pgDSN: pgDSN}
	mockPort, floorPort, pooledPort, gwPort, adminPort, floorAdmin := freePort(), freePort(), freePort(), freePort(), freePort(), freePort()
	e.pooledURL = fmt.Sprintf("http://127.0.0.1:%d", pooledPort)
	e.mockURL = fmt.Sprintf("http://127.0.0.1:%d", mockPort)
	e.floorURL = fmt.Sprintf("http://127.0.0.1:%d", floorPort)
	e.gwURL = fmt.Sprintf("http://127.0.0.1:%d", gwPort)
	e.adminURL = fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	e.floorAdminURL = fmt.Sprintf("http://127.0.0.1:%d", floorAdmin)

	key, account, err := fundedKey(ledger.Options{Path: e.db})
	if err != nil {
		return nil, err
	}
	e.account, e.key = account, key
	global := func(admin string) string { return "{\n\t" + admin + "\n\tpersist_config off\n\tgrace_period 2s\n}\n" }
	if e.mock, err = startCaddy(bin, dir, "mock", global("admin off")+fmt.Sprintf(`
http://127.0.0.1:%d {
	modelgate_mock {
		keys %s
	}
}
`, mockPort, mockKey), e.mockURL+"/"); err != nil {
		return nil, err
	}
	floorCfg := func(port int, transport, admin string) string {
		return global(admin) + fmt.Sprintf(`
http://127.0.0.1:%d {
	reverse_proxy 127.0.0.1:%d {
		header_up Authorization "Bearer %s"
%s	}
}
`, port, mockPort, mockKey, transport)
	}
	if e.floor, err = startCaddy(bin, dir, "floor", floorCfg(floorPort, "", fmt.Sprintf("admin 127.0.0.1:%d", floorAdmin)), e.floorURL+"/"); err != nil {
		e.close()
		return nil, err
	}
	pool := "\t\ttransport http {\n\t\t\tkeepalive_idle_conns_per_host 1024\n\t\t}\n"
	if e.pooled, err = startCaddy(bin, dir, "floor-pooled", floorCfg(pooledPort, pool, "admin off"), e.pooledURL+"/"); err != nil {
		e.close()
		return nil, err
	}
	var providers strings.Builder
	for _, f := range []string{"openai", "anthropic", "gemini"} {
		fmt.Fprintf(&providers, "\t\tprovider mock-%s {\n\t\t\tformat %s\n\t\t\tbase_url %s\n\t\t\tkeys %s\n\t\t\thealth_check off\n\t\t}\n", f, f, e.mockURL, mockKey)
	}
	e.gwConfig = func(admin string, ledgerLine string, port int) string {
		return fmt.Sprintf(`{
	%s
	persist_config off
	grace_period 2s
	modelgate {
		%s
		# limits every request passes through (never reached here)
		plan bench {
			rpm 100000000
			concurrency 100000
		}
		default_plan bench
%s		model gpt-4o-mini {
			route mock-openai gpt-4o-mini
			price input 0.15 output 0.60
			max_output 16384
		}
		model claude-bench {
			route mock-anthropic claude-sonnet-4-5
			price input 3 output 15
			max_output 16384
		}
		model gemini-bench {
			route mock-gemini gemini-2.5-flash
			price input 0.3 output 2.5
			max_output 16384
		}
	}
}

http://127.0.0.1:%d {
	modelgate_api
}
`, admin, ledgerLine, providers.String(), port)
	}
	if e.gw, err = startCaddy(bin, dir, "gateway", e.gwConfig(fmt.Sprintf("admin 127.0.0.1:%d", adminPort), "ledger sqlite "+e.db, gwPort), e.gwURL+"/"); err != nil {
		e.close()
		return nil, err
	}
	if pgDSN != "" {
		pgKey, pgAccount, err := fundedKey(ledger.Options{Postgres: pgDSN})
		if err != nil {
			e.close()
			return nil, fmt.Errorf("the PostgreSQL ledger: %w", err)
		}
		e.pgAccount, e.pgKey = pgAccount, pgKey
		pgPort := freePort()
		os.Setenv("MGBENCH_POSTGRES", pgDSN)
		pgAdmin := freePort()
		e.pgAdminURL = fmt.Sprintf("http://127.0.0.1:%d", pgAdmin)
		if e.pg, err = startCaddy(bin, dir, "gateway-postgres", e.gwConfig(fmt.Sprintf("admin 127.0.0.1:%d", pgAdmin), "ledger postgres {env.MGBENCH_POSTGRES}", pgPort), fmt.Sprintf("http://127.0.0.1:%d/", pgPort)); err != nil {
			e.close()
			return nil, err
		}
		e.pgT = &target{name: "gateway-postgres", base: fmt.Sprintf("http://127.0.0.1:%d", pgPort), headers: []string{"Authorization", "Bearer " + pgKey}, gateway: true}
	}
	e.direct = &target{name: "direct", base: e.mockURL, headers: []string{"Authorization", "Bearer " + mockKey}}
	e.floorT = &target{name: "floor", base: e.floorURL}
	e.pooledT = &target{name: "floor-pooled", base: e.pooledURL}
	e.gwT = &target{name: "gateway", base: e.gwURL, headers: []string{"Authorization", "Bearer " + key}, gateway: true}
	return e, nil
}

// fundedKey creates one funded account and its key in the ledger opts
// opens, and returns the key and the account.
func fundedKey(opts ledger.Options) (key, account string, err error) {
	ctx := context.Background()
	s, err := ledger.Open(ctx, opts)
	if err != nil {
		return "", "", err
	}
	defer s.Close()
	a, err := s.CreateAccount(ctx, "", "bench")
	if err != nil {
		return "", "", err
	}
	amount, _ := ledger.ParseMoney(credit)
	if _, err := s.Credit(ctx, ledger.CreditRequest{AccountID: a.ID, Amount: amount, Reference: "bench:" + a.ID, Reason: "bench"}); err != nil {
		return "", "", err
	}
	secret, _, err := s.CreateKey(ctx, a.ID, "bench")
	return secret, a.ID, err
}

func (e *env) close() {
	for _, p := range []*proc{e.gw, e.pg, e.floor, e.pooled, e.mock} {
		p.stop()
	}
}

// row is one line of the table.
type row struct {
	what, floor, gateway, ratio, target string
	pass                                *bool
}

func ratio(g, f float64) string {
	if f == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", g/f)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

// added is a signed difference in milliseconds.
func added(d time.Duration) string { return fmt.Sprintf("%+.3f ms", float64(d)/1e6) }

func check(ok bool) *bool { return &ok }

// bench runs every phase and prints the table.
func (e *env) bench(d time.Duration, latN, nStreams, rssStreams int, profile string) error {
	var rows []row
	c50 := newClient(64)
	plain := chat("gpt-4o-mini", "Hello there, how are you today?", false)

	// warm up both
	throughput(c50, e.floorT, plain, 50, time.Second)
	throughput(c50, e.pooledT, plain, 50, time.Second)
	throughput(c50, e.gwT, plain, 50, time.Second)

	// throughput and CPU per request: the floor, the gateway passing
	// through (chat → OpenAI) and translating (chat → Anthropic), in four
	// interleaved rounds so that drift on a shared machine hits all three
	translated := chat(e.gwAnthropic, "Hello there, how are you today?", false)
	const rounds = 4
	var f, pooled, g, tr tally
	var q postgresLoad
	var profDone chan error
	for i := range rounds {
		f.round(c50, e.floor, e.floorT, plain, d/rounds)
		pooled.round(c50, e.pooled, e.pooledT, plain, d/rounds)
		if i == rounds-1 {
			profDone = startProfile(e.adminURL, profile, d/rounds)
		}
		g.round(c50, e.gw, e.gwT, plain, d/rounds)
		tr.round(c50, e.gw, e.gwT, translated, d/rounds)
		if e.pgT != nil {
			if i == 0 {
				throughput(c50, e.pgT, plain, 50, time.Second) // warm up
			}
			e.postgresRound(c50, plain, d/rounds, &q)
		}
	}
	waitProfile(profDone)
	// The targets (bench/RESULTS.md), against both floors: CPU per request
	// ≤ 1.10× passing through and ≤ 1.30× translating, throughput ≥ 0.90×
	// (≥ 0.80× on PostgreSQL), added p50 ≤ 0.15 ms and time to first token
	// ≤ 0.10 ms, memory per open stream no more than the floor's.
	fRPS, gRPS := f.rps(d), g.rps(d)
	rows = append(rows, row{"requests/s, c=50, non-stream", fmt.Sprintf("%.0f", fRPS), fmt.Sprintf("%.0f", gRPS), ratio(gRPS, fRPS), "≥ 0.90×", check(gRPS >= 0.9*fRPS)})
	fPer, gPer, tPer := f.per(), g.per(), tr.per()
	rows = append(rows, row{"CPU per request, pass-through (chat → OpenAI)", fmt.Sprintf("%.0f µs", float64(fPer)/1e3), fmt.Sprintf("%.0f µs", float64(gPer)/1e3),
		ratio(float64(gPer), float64(fPer)), "≤ 1.10×", check(float64(gPer) <= 1.10*float64(fPer))})
	rows = append(rows, row{"CPU per request, translated (chat → Anthropic)", fmt.Sprintf("%.0f µs", float64(fPer)/1e3), fmt.Sprintf("%.0f µs", float64(tPer)/1e3),
		ratio(float64(tPer), float64(fPer)), "≤ 1.30×", check(float64(tPer) <= 1.30*float64(fPer))})
	pRPS, pPer := pooled.rps(d), pooled.per()
	if e.pgT != nil {
		rows = append(rows, q.rows(fRPS, fPer, d)...)
	}
	rows = append(rows,
		row{"requests/s, c=50, vs the floor with modelgate's pool", fmt.Sprintf("%.0f", pRPS), fmt.Sprintf("%.0f", gRPS), ratio(gRPS, pRPS), "≥ 0.90×", check(gRPS >= 0.9*pRPS)},
		row{"CPU per request, pass-through, vs the floor with modelgate's pool", fmt.Sprintf("%.0f µs", float64(pPer)/1e3), fmt.Sprintf("%.0f µs", float64(gPer)/1e3), ratio(float64(gPer), float64(pPer)),
			"≤ 1.10×", check(float64(gPer) <= 1.10*float64(pPer))},
		row{"CPU per request, translated, vs the floor with modelgate's pool", fmt.Sprintf("%.0f µs", float64(pPer)/1e3), fmt.Sprintf("%.0f µs", float64(tPer)/1e3), ratio(float64(tPer), float64(pPer)),
			"≤ 1.30×", check(float64(tPer) <= 1.30*float64(pPer))})

	// streams at c=50: 200 tokens as fast as the mock makes them (many
	// events a read), the floor, the pooled floor and the gateway in turn
	streamed := chat("gpt-4o-mini", "mock:tokens=200 Hello there", true)
	// and the same stream translated for an Anthropic client (against the
	// floors passing the OpenAI stream through, as the translated row above)
	streamedTr := messages("gpt-4o-mini", "mock:tokens=200 Hello there", true)
	// (four interleaved rounds of d/8 each: with two, one slow spell of
	// the machine moved the ratios by a tenth)
	var fs, ps, gs, ts tally
	for range 4 {
		fs.round(c50, e.floor, e.floorT, streamed, d/8)
		ps.round(c50, e.pooled, e.pooledT, streamed, d/8)
		gs.round(c50, e.gw, e.gwT, streamed, d/8)
		ts.round(c50, e.gw, e.gwT, streamedTr, d/8)
	}
	fsPer, psPer, gsPer, tsPer := float64(fs.per()), float64(ps.per()), float64(gs.per()), float64(ts.per())
	us := func(v float64) string { return fmt.Sprintf("%.0f µs", v/1e3) }
	rows = append(rows,
		row{"CPU per request, streamed pass-through (200 tokens)", us(fsPer), us(gsPer), ratio(gsPer, fsPer), "≤ 1.10×", check(gsPer <= 1.10*fsPer)},
		row{"CPU per request, streamed, translated (to an Anthropic client)", us(fsPer), us(tsPer), ratio(tsPer, fsPer), "≤ 1.30×", check(tsPer <= 1.30*fsPer)},
		row{"CPU per request, streamed pass-through, vs the floor with modelgate's pool", us(psPer), us(gsPer), ratio(gsPer, psPer), "≤ 1.10×", check(gsPer <= 1.10*psPer)},
		row{"CPU per request, streamed, translated, vs the floor with modelgate's pool", us(psPer), us(tsPer), ratio(tsPer, psPer), "≤ 1.30×", check(tsPer <= 1.30*psPer)})
	if countSyscalls {
		rows = append(rows,
			row{"system calls per request, c=50, pass-through (pooled floor: " + pooled.callsPer() + ")", f.callsPer(), g.callsPer(), "", "", nil},
			row{"system calls per request, c=50, streamed pass-through (pooled floor: " + ps.callsPer() + ")", fs.callsPer(), gs.callsPer(), "", "", nil},
			row{"system calls per request, c=50, streamed, translated", fs.callsPer(), ts.callsPer(), "", "", nil})
	}

	// latency at one connection
	c1 := newClient(4)
	lat := latencies(c1, []*target{e.direct, e.floorT, e.gwT}, plain, latN)
	dp50, dp99 := percentile(lat["direct"], 50), percentile(lat["direct"], 99)
	fp50, fp99 := percentile(lat["floor"], 50)-dp50, percentile(lat["floor"], 99)-dp99
	gp50, gp99 := percentile(lat["gateway"], 50)-dp50, percentile(lat["gateway"], 99)-dp99
	rows = append(rows,
		row{"added latency p50, c=1 (direct " + ms(percentile(lat["direct"], 50)) + ")", ms(fp50), ms(gp50), added(gp50 - fp50), "≤ +0.15 ms", check(gp50-fp50 <= 150*time.Microsecond)},
		row{"added latency p99, c=1 (direct " + ms(percentile(lat["direct"], 99)) + ")", ms(fp99), ms(gp99), added(gp99 - fp99), "", nil})

	// time to first token, one stream at a time
	ttft := firstTokens(c1, []*target{e.direct, e.floorT, e.gwT}, chat("gpt-4o-mini", "mock:tokens=5 Hello there", true), latN/4)
	dT := percentile(ttft["direct"], 50)
	fT, gT := percentile(ttft["floor"], 50)-dT, percentile(ttft["gateway"], 50)-dT
	rows = append(rows, row{"added time to first token p50, c=1 (direct " + ms(dT) + ")", ms(fT), ms(gT), added(gT - fT), "≤ +0.10 ms", check(gT-fT <= 100*time.Microsecond)})

	// memory per open stream: the process's RSS, and its live Go memory
	// (heap objects and goroutine stacks right after a collection). The RSS
	// difference also counts whatever heap the process kept or returned to
	// the system since the phases above, which swings it from run to run;
	// the live memory is what each open stream holds. It runs before the
	// stall phase, whose 512 streams would leave that many idle upstream
	// connections in the gateway's pool (the floor keeps 32) for these
	// streams to reuse uncounted; each target gets fresh client connections.
	rssPer, goPer := map[string]float64{}, map[string]float64{}
	veryLong := chat("gpt-4o-mini", "mock:tokens=200 mock:delay=40ms Hello there", true)
	for _, pt := range []struct {
		p     *proc
		t     *target
		admin string
	}{{e.floor, e.floorT, e.floorAdminURL}, {e.gw, e.gwT, e.adminURL}} {
		cm := newClient(rssStreams + 16)
		idle := pt.p.rss()
		idleGo, err := liveGoMemory(pt.admin)
		if err != nil {
			return fmt.Errorf("memory phase: %w", err)
		}
		first := make(chan struct{}, rssStreams)
		var wg sync.WaitGroup
		for range rssStreams {
			wg.Add(1)
			go func() { defer wg.Done(); pt.t.stream(cm, veryLong, first) }()
		}
		for range rssStreams {
			<-first
		}
		time.Sleep(500 * time.Millisecond)
		rssPer[pt.t.name] = float64(pt.p.rss()-idle) / float64(rssStreams)
		open, err := liveGoMemory(pt.admin)
		wg.Wait()
		if err != nil {
			return fmt.Errorf("memory phase: %w", err)
		}
		goPer[pt.t.name] = float64(open-idleGo) / float64(rssStreams)
		cm.CloseIdleConnections()
	}
	rows = append(rows, row{fmt.Sprintf("RSS per open stream at %d streams", rssStreams), fmt.Sprintf("%.1f KiB", rssPer["floor"]/1024), fmt.Sprintf("%.1f KiB", rssPer["gateway"]/1024),
		ratio(rssPer["gateway"], rssPer["floor"]), "≤ 1.00×", check(rssPer["gateway"] <= rssPer["floor"])})
	rows = append(rows, row{fmt.Sprintf("live Go memory per open stream at %d streams", rssStreams), fmt.Sprintf("%.1f KiB", goPer["floor"]/1024), fmt.Sprintf("%.1f KiB", goPer["gateway"]/1024),
		ratio(goPer["gateway"], goPer["floor"]), "≤ 1.00×", check(goPer["gateway"] <= goPer["floor"])})

	// frame stalls with many concurrent streams: 60 tokens, one every 25 ms
	long := chat("gpt-4o-mini", "mock:tokens=60 mock:delay=25ms Hello there", true)
	cs := newClient(nStreams + 16)
	stalls := map[string]string{}
	var stallN [2]int
	for i, t := range []*target{e.floorT, e.gwT} {
		// a warm-up burst first: the first one of a target dials every
		// connection at once, and its stalls (hundreds, the floor's as
		// the gateway's) are that storm's, not the steady state's
		frameGaps(cs, t, long, nStreams)
		gaps, failed, atEnd := frameGaps(cs, t, long, nStreams)
		n := stallsIn(gaps)
		stallN[i] = n
		stalls[t.name] = fmt.Sprintf("%d stalls (%d at a stream's end), p99 gap %s, %d failed", n, atEnd, ms(percentile(gaps, 99)), failed)
	}
	rows = append(rows, row{fmt.Sprintf("frame stalls (> 125 ms) at %d streams of 25 ms frames", nStreams), stalls["floor"], stalls["gateway"], "", "0 added", check(stallN[1] <= stallN[0])})

	// the ledger: how its writes were grouped; then stop the gateway and count
	if sum, n := e.metric("modelgate_ledger_commit_commands_sum"), e.metric("modelgate_ledger_commit_commands_count"); n > 0 {
		rows = append(rows, row{"ledger: settles per write transaction (mean)", "", fmt.Sprintf("%.1f", sum/n), "", "", nil})
	}
	e.gw.stop()
	lost, audit, err := lostDebits(ledger.Options{Path: e.db}, e.account, e.key, e.gwT.answered.Load())
	if err != nil {
		return err
	}
	rows = append(rows, row{"lost debits (200 answers − usage rows)", "", fmt.Sprint(lost), "", "0", check(lost == 0)},
		row{"balance vs credits − debits", "", audit, "", "equal", check(audit == "equal")})
	if e.pgT != nil {
		pgRows, err := e.postgresLedgerRows()
		if err != nil {
			return err
		}
		rows = append(rows, pgRows...)
	}

	e.print(rows)
	return nil
}

// benchPostgres measures the floor and the gateway on PostgreSQL only, at
// c=50 in interleaved rounds, and checks the ledger after.
func (e *env) benchPostgres(d time.Duration, profile string) error {
	c50 := newClient(64)
	plain := chat("gpt-4o-mini", "Hello there, how are you today?", false)
	throughput(c50, e.floorT, plain, 50, time.Second)
	throughput(c50, e.pgT, plain, 50, time.Second)
	const rounds = 4
	var f tally
	var q postgresLoad
	var profDone chan error
	for i := range rounds {
		f.round(c50, e.floor, e.floorT, plain, d/rounds)
		if i == rounds-1 {
			profDone = startProfile(e.pgAdminURL, profile, d/rounds)
		}
		e.postgresRound(c50, plain, d/rounds, &q)
	}
	waitProfile(profDone)
	rows := q.rows(f.rps(d), f.per(), d)
	pgRows, err := e.postgresLedgerRows()
	if err != nil {
		return err
	}
	e.print(append(rows, pgRows...))
	return nil
}

// frameGaps opens n streams of r on t at once and returns the gaps between
// their events, sorted, how many streams failed, and the stalls among the
// streams' last three gaps (before the finish, usage and end events, which
// a gateway holds until the bill is settled).
func frameGaps(c *http.Client, t *target, r request, n int) (gaps []time.Duration, failed, endStalls int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, g, ok := t.stream(c, r, nil)
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				failed++
			}
			endStalls += stallsIn(g[max(len(g)-3, 0):])
			gaps = append(gaps, g...)
		}()
	}
	wg.Wait()
	slices.Sort(gaps)
	return gaps, failed, endStalls
}

// stallsIn counts the gaps over 125 ms (five frames of 25 ms).
func stallsIn(gaps []time.Duration) int {
	n := 0
	for _, g := range gaps {
		if g > 125*time.Millisecond {
			n++
		}
	}
	return n
}

// tally sums c=50 rounds on one target: the answers, and the CPU the
// process serving it spent.
type tally struct {
	ok  int64
	cpu time.Duration
	// system calls in the rounds (-syscalls), and the answers of the
	// rounds that counted them
	calls, callsOK int64
}

// round runs one c=50 round of d on t, served by p, and adds it up.
func (tl *tally) round(c *http.Client, p *proc, t *target, r request, d time.Duration) {
	var sc *syscallCounter
	if countSyscalls {
		sc = p.startSyscalls()
	}
	c0 := p.cpu()
	n, _ := throughput(c, t, r, 50, d)
	o := tally{ok: n, cpu: p.cpu() - c0}
	if calls := sc.stop(); calls >= 0 {
		o.calls, o.callsOK = calls, n
	}
	tl.add(o)
}

// add adds another tally's answers, CPU and system calls.
func (tl *tally) add(o tally) {
	tl.ok, tl.cpu = tl.ok+o.ok, tl.cpu+o.cpu
	tl.calls, tl.callsOK = tl.calls+o.calls, tl.callsOK+o.callsOK
}

// callsPer is the system calls per answer, "" when they were not counted.
func (tl tally) callsPer() string {
	if tl.callsOK == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f", float64(tl.calls)/float64(tl.callsOK))
}

// rps is the answers per second over the rounds' total time d.
func (tl tally) rps(d time.Duration) float64 { return float64(tl.ok) / d.Seconds() }

// per is the CPU per answer.
func (tl tally) per() time.Duration { return tl.cpu / time.Duration(max(tl.ok, 1)) }

// startProfile, when profile names a file, starts a CPU profile of the
// gateway whose admin endpoint is admin, for most of the next round of d;
// waitProfile waits for it.
func startProfile(admin, profile string, d time.Duration) chan error {
	if profile == "" {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- cpuProfile(admin, profile, d-500*time.Millisecond) }()
	return done
}

// waitProfile waits for the profile startProfile started, if any.
func waitProfile(done chan error) {
	if done == nil {
		return
	}
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
	}
}

// postgresLoad sums the c=50 rounds on the gateway on PostgreSQL: answers,
// the gateway's CPU, and the PostgreSQL server's (when it is on this machine).
type postgresLoad struct {
	tally
	server time.Duration
}

// postgresRound runs one round of d on the gateway on PostgreSQL.
func (e *env) postgresRound(c *http.Client, r request, d time.Duration, q *postgresLoad) {
	s0 := postgresCPU()
	q.round(c, e.pg, e.pgT, r, d)
	q.server += postgresCPU() - s0
}

// rows are the table's PostgreSQL rows, against the floor's requests/s and
// CPU per request over the same total time d.
func (q postgresLoad) rows(fRPS float64, fPer, d time.Duration) []row {
	qRPS := q.rps(d)
	per := func(t time.Duration) string {
		return fmt.Sprintf("%.0f µs", float64(t/time.Duration(max(q.ok, 1)))/1e3)
	}
	return []row{
		{"requests/s, c=50, PostgreSQL ledger (same machine)", fmt.Sprintf("%.0f", fRPS), fmt.Sprintf("%.0f", qRPS), ratio(qRPS, fRPS), "≥ 0.80×", check(qRPS >= 0.8*fRPS)},
		{"CPU per request, PostgreSQL ledger (the gateway's own; PostgreSQL's not counted)", fmt.Sprintf("%.0f µs", float64(fPer)/1e3), per(q.cpu),
			ratio(float64(q.per()), float64(fPer)), "", nil},
		{"PostgreSQL's own CPU per request (its processes on this machine)", "", per(q.server), "", "", nil},
	}
}

// postgresLedgerRows stops the gateway on PostgreSQL and checks its ledger:
// lost debits, and the balance against credits − debits.
func (e *env) postgresLedgerRows() ([]row, error) {
	e.pg.stop()
	lost, audit, err := lostDebits(ledger.Options{Postgres: e.pgDSN}, e.pgAccount, e.pgKey, e.pgT.answered.Load())
	if err != nil {
		return nil, err
	}
	return []row{{"lost debits, PostgreSQL ledger", "", fmt.Sprint(lost), "", "0", check(lost == 0)},
		{"balance vs credits − debits, PostgreSQL ledger", "", audit, "", "equal", check(audit == "equal")}}, nil
}

// metric reads one unlabelled sample from the gateway's metrics.
func (e *env) metric(name string) float64 { return metric(e.adminURL, name) }

// metric reads an unlabelled metric of the gateway whose admin endpoint is admin.
func metric(admin, name string) float64 {
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0
			}
			return f
		}
	}
	return 0
}

// cpuProfile fetches a CPU profile of a gateway from Caddy's admin pprof.
func cpuProfile(adminURL, file string, d time.Duration) error {
	resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", adminURL, max(1, int(d.Seconds()))))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// lostDebits compares a gateway's complete 200 answers with the account's
// usage rows, and the balance with credits − debits.
func lostDebits(opts ledger.Options, account, key string, answered int64) (lost int64, audit string, err error) {
	ctx := context.Background()
	s, err := ledger.Open(ctx, opts)
	if err != nil {
		return 0, "", err
	}
	defer s.Close()
	p, err := s.Authenticate(key)
	if err != nil {
		return 0, "", err
	}
	ku, err := s.KeyUsage(ctx, p.KeyID) // the key's running totals: requests and spend
	if err != nil {
		return 0, "", err
	}
	a, err := s.GetAccount(ctx, account)
	if err != nil {
		return 0, "", err
	}
	funded, _ := ledger.ParseMoney(credit)
	audit = "equal"
	if a.Balance != funded-ku.Spent || a.Held != 0 {
		audit = fmt.Sprintf("balance %s, credits − debits %s, held %s", a.Balance, funded-ku.Spent, a.Held)
	}
	if mm, err := s.Audit(ctx); err != nil || len(mm) > 0 {
		audit = fmt.Sprintf("audit: %v %v", err, mm)
	}
	return answered - ku.Requests, audit, nil
}

func (e *env) print(rows []row) {
	host, _ := os.Hostname()
	fmt.Printf("modelgate bench, %s, %s, %d CPUs (%s), %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), host, runtime.NumCPU(), cpuModel(), runtime.Version())
	fmt.Println("| measure | floor (reverse_proxy) | modelgate | ratio / added | target | ok |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rows {
		ok := ""
		if r.pass != nil {
			ok = "✗"
			if *r.pass {
				ok = "✓"
			}
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", r.what, r.floor, r.gateway, r.ratio, r.target, ok)
	}
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "unknown CPU"
}
