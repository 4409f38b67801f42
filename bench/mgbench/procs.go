package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one Caddy process of the run.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
}

// startCaddy runs bin with the Caddyfile text and waits until ready
// answers 200... or any status, for a URL that needs no key.
func startCaddy(bin, dir, name, caddyfile, ready string) (*proc, error) {
	cfg := filepath.Join(dir, name+".Caddyfile")
	if err := os.WriteFile(cfg, []byte(caddyfile), 0o600); err != nil {
		return nil, err
	}
	p := &proc{name: name, log: filepath.Join(dir, name+".log")}
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command(bin, "run", "--config", cfg)
	p.cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "GOGC=100")
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(ready); err == nil {
			resp.Body.Close()
			return p, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.stop()
	out, _ := os.ReadFile(p.log)
	return nil, fmt.Errorf("%s did not start:\n%s", name, out)
}

// stop ends the process gracefully (SIGINT), then waits.
func (p *proc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// cpu returns the process's user + system CPU time so far.
func (p *proc) cpu() time.Duration {
	return pidCPU(strconv.Itoa(p.cmd.Process.Pid))
}

// postgresCPU is the CPU time of every process on this machine named
// postgres (the server's backends and its background workers) that is
// still running: a PostgreSQL server on the same machine as the bench.
func postgresCPU() time.Duration {
	dirs, _ := os.ReadDir("/proc")
	var t time.Duration
	for _, d := range dirs {
		if comm, err := os.ReadFile("/proc/" + d.Name() + "/comm"); err == nil && string(comm) == "postgres\n" {
			t += pidCPU(d.Name())
		}
	}
	return t
}

// pidCPU is a process's user and system CPU time.
func pidCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// after "pid (comm) ": state is field 3; utime and stime are 14 and 15
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}

// clockTicks is the kernel's USER_HZ, 100 on every Linux platform Go runs.
const clockTicks = 100

// rss returns the process's resident set size in bytes.
func (p *proc) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// freePort returns a loopback port nothing listens on.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// countSyscalls, when set (-syscalls), makes every c=50 round also count
// the serving process's system calls, with perf's raw_syscalls tracepoint:
// strace stops the process at every call, which slows it so much that a
// stream's events pile up and are read and written in far fewer calls than
// without it.
var countSyscalls bool

// syscallCounter is perf stat counting one process's system calls; its
// count goes to its standard error, with its own errors.
type syscallCounter struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

// startSyscalls starts counting p's system calls; nil when perf cannot
// (with a message, once, for this and for counts stop cannot read).
func (p *proc) startSyscalls() *syscallCounter {
	c := &syscallCounter{}
	c.cmd = exec.Command("perf", "stat", "-x", ",", "-e", "raw_syscalls:sys_enter", "-p", strconv.Itoa(p.cmd.Process.Pid))
	c.cmd.Stderr = &c.out
	if err := c.cmd.Start(); err != nil {
		perfMissing.Do(func() { fmt.Fprintln(os.Stderr, "mgbench: -syscalls needs perf:", err) })
		return nil
	}
	// perf attaches to the process's threads after it starts: give it a
	// moment, while the process is idle, so that the round is counted whole
	time.Sleep(200 * time.Millisecond)
	return c
}

// perfMissing prints the first failure of -syscalls only.
var perfMissing sync.Once

// stop ends the count and returns it; -1 when it could not be read.
func (c *syscallCounter) stop() int64 {
	if c == nil {
		return -1
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	_ = c.cmd.Wait()
	// a line "count,,raw_syscalls:sys_enter,…" among comments
	for _, line := range strings.Split(c.out.String(), "\n") {
		if count, rest, ok := strings.Cut(line, ","); ok && strings.Contains(rest, "raw_syscalls:sys_enter") {
			if n, err := strconv.ParseInt(count, 10, 64); err == nil {
				return n
			}
		}
	}
	// "<not supported>" (no tracepoints), a permission refused, …
	perfMissing.Do(func() { fmt.Fprintf(os.Stderr, "mgbench: perf counted no system calls:\n%s\n", c.out.String()) })
	return -1
}
