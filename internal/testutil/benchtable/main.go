// Command benchtable reads `go test -bench` output of kaimon's benchmarks
// on stdin and prints the one table scripts/bench.sh shows: each figure,
// the median of its runs, beside its floor or bare run from the same
// benchmark run, their ratio, the target (issue 12) and whether it
// is met. A figure whose benchmark did not run is left out; a benchmark
// that skipped is a row that says why, and makes benchtable exit 1: a
// table that quietly lacks its end-to-end rows reads as if they passed.
package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kaimon/kaimon/internal/agentbin"
)

// results maps benchmark name (no -procs suffix) → unit → values.
type results map[string]map[string][]float64

// skip is a benchmark that skipped, and why.
type skip struct{ name, why string }

var (
	procsRE = regexp.MustCompile(`-\d+$`)
	skipRE  = regexp.MustCompile(`^\s*--- SKIP: (\S+)`)
)

// parse reads go test's output: the benchmarks' figures, and those that
// skipped with the line after each SKIP (the t.Skip message), once each.
func parse(r io.Reader) (results, []skip) {
	res := results{}
	var skips []skip
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	pending := "" // a SKIP whose reason is the next line
	for sc.Scan() {
		if pending != "" {
			// The reason is the indented line after the SKIP, if any.
			line := sc.Text()
			why := strings.TrimSpace(line)
			indented := strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")
			if !indented || strings.HasPrefix(why, "---") {
				why = ""
			}
			if !slices.ContainsFunc(skips, func(s skip) bool { return s.name == pending }) {
				skips = append(skips, skip{pending, cmp.Or(why, "(no reason given)")})
			}
			pending = ""
			if why != "" {
				continue // the reason, read
			}
		}
		if m := skipRE.FindStringSubmatch(sc.Text()); m != nil {
			pending = strings.TrimPrefix(m[1], "Benchmark")
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := procsRE.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		if res[name] == nil {
			res[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			res[name][f[i+1]] = append(res[name][f[i+1]], v)
		}
	}
	if pending != "" {
		skips = append(skips, skip{pending, "(no reason given)"})
	}
	return res, skips
}

// get is the median of name's unit, and whether it was measured.
func (r results) get(name, unit string) (float64, bool) {
	v := slices.Clone(r[name][unit])
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

// row is one line of the table.
type row struct{ figure, measured, floor, ratio, target, met string }

func main() {
	r, skips := parse(os.Stdin)
	print(table(r, skips))
	if len(skips) > 0 {
		fmt.Fprintf(os.Stderr, "benchtable: %d benchmark(s) skipped: their rows say why (scripts/setup-test.sh installs what the end-to-end ones need)\n", len(skips))
		os.Exit(1)
	}
}

// table is the table's rows: r's figures, then a row per skip.
func table(r results, skips []skip) []row {
	var rows []row
	add := func(figure, measured, floor, ratio, target, met string) {
		rows = append(rows, row{figure, measured, floor, ratio, target, met})
	}
	verdict := func(ok bool) string {
		if ok {
			return "MET"
		}
		return "NOT MET"
	}
	msOf := func(name string) (float64, bool) { v, ok := r.get(name, "ns/op"); return v / 1e6, ok }

	// The warm turn and the agent's start (BenchmarkOverhead).
	bare, okB := r.get("Overhead/turn", "bare-ms")
	api, okA := r.get("Overhead/turn", "api-ms")
	curl, okC := r.get("Overhead/turn", "curl-ms")
	run, okR := r.get("Overhead/turn", "kaimon-ms")
	if okB {
		add("warm turn: bare claude CLI (fake API)", f1(bare)+" ms", "", "", "", "")
	}
	if okA && okB {
		add("warm turn: control API (in-process client)", f1(api)+" ms", "bare "+f1(bare)+" ms", plus(api-bare)+" ms", "≤ +1 ms", verdict(api-bare <= 1))
	}
	if okC && okB {
		add("warm turn: curl --unix-socket agent_run", f1(curl)+" ms", "bare "+f1(bare)+" ms", plus(curl-bare)+" ms", "", "")
	}
	if okR && okC {
		add("warm turn: kaimon run", f1(run)+" ms", "curl "+f1(curl)+" ms", plus(run-curl)+" ms", "≤ +3 ms over curl", verdict(run-curl <= 3))
	}
	if s, ok := msOf("Overhead/startup/kaimon"); ok {
		sb, _ := msOf("Overhead/startup/bare")
		add("agent start: kaimon open", f1(s)+" ms", "bare spawn "+f1(sb)+" ms", plus(s-sb)+" ms", "", "")
	}
	// Issue 28: a warm turn of each ACP agent, kaimon's agent_run beside
	// a bare ACP client of the same program (BenchmarkACPAgentTurn), in
	// the catalogue's order.
	for _, name := range agentbin.ACPNames {
		key := "ACPAgentTurn/" + name
		api, ok := r.get(key, "api-ms")
		if !ok {
			continue
		}
		bare, _ := r.get(key, "bare-ms")
		add("warm turn, acp:"+name+": control API", f1(api)+" ms", "bare ACP client "+f1(bare)+" ms", plus(api-bare)+" ms", "≤ +5 ms", verdict(api-bare <= 5))
		// Of that, what an agent costs with the door's tool schemas
		// alone (a bare client offering the same tools).
		if tools, ok := r.get(key, "tools-ms"); ok {
			add("  bare client offering the door's tools", f1(tools)+" ms", "bare ACP client "+f1(bare)+" ms", plus(tools-bare)+" ms", "", "")
			add("  control API over that: kaimon's plumbing", f1(api)+" ms", "with tools "+f1(tools)+" ms", plus(api-tools)+" ms", "", "")
		}
	}
	// Issue 32: a warm turn of a codex: agent, kaimon's agent_run beside a
	// bare app-server client of the same program (BenchmarkCodexTurn).
	if api, ok := r.get("CodexTurn", "api-ms"); ok {
		bare, _ := r.get("CodexTurn", "bare-ms")
		add("warm turn, codex: control API", f1(api)+" ms", "bare app-server client "+f1(bare)+" ms", plus(api-bare)+" ms", "≤ +5 ms", verdict(api-bare <= 5))
		if tools, ok := r.get("CodexTurn", "tools-ms"); ok {
			add("  bare client offering the door's tools", f1(tools)+" ms", "bare app-server client "+f1(bare)+" ms", plus(tools-bare)+" ms", "", "")
			add("  control API over that: kaimon's plumbing", f1(api)+" ms", "with tools "+f1(tools)+" ms", plus(api-tools)+" ms", "", "")
		}
	}
	// Issue 29: a permission request answered as an MRTR round by a
	// 2026-07-28 client of kaimon mcp, beside the same request answered
	// with agent_permit at once (BenchmarkMRTRRound).
	if m, ok := r.get("MRTRRound", "mrtr-ms"); ok {
		p, _ := r.get("MRTRRound", "permit-ms")
		add("permission answered: MRTR round (kaimon mcp)", f1(m)+" ms", "agent_permit "+f1(p)+" ms", plus(m-p)+" ms", "≤ +5 ms", verdict(m-p <= 5))
	}
	// Issue 21: eight worktree agents opened at once on one repository,
	// each open beside an open without a worktree (eight at once) plus a
	// bare git worktree add (eight one after another, as the daemon runs
	// them).
	if w, ok := r.get("WorktreeOpen", "worktree-ms"); ok {
		p, _ := r.get("WorktreeOpen", "plain-ms")
		g, _ := r.get("WorktreeOpen", "git-ms")
		add("8 opens at once, --worktree: one open", f1(w)+" ms", "open "+f1(p)+" + git "+f1(g)+" ms", plus(w-p-g)+" ms", "", "")
		ww, _ := r.get("WorktreeOpen", "worktree-wall-ms")
		pw, _ := r.get("WorktreeOpen", "plain-wall-ms")
		gw, _ := r.get("WorktreeOpen", "git-wall-ms")
		add("  all eight, wall", f1(ww)+" ms", "open "+f1(pw)+" + git "+f1(gw)+" ms", plus(ww-pw-gw)+" ms", "", "")
	}
	// CLI start.
	if k, ok := r.get("CLIStart", "kaimon-ms"); ok {
		c, _ := r.get("CLIStart", "curl-ms")
		add("CLI start: kaimon list --json", f1(k)+" ms", "curl "+f1(c)+" ms", fx(k/c), "≤ 1.10×", verdict(k/c <= 1.1))
	}
	// Issue 19's warm remote call: through ssh to a host in a network
	// namespace, beside this machine's daemon and a bare ssh.
	if rm, ok := r.get("FleetWarmCall", "remote-ms"); ok {
		l, _ := r.get("FleetWarmCall", "local-ms")
		s, _ := r.get("FleetWarmCall", "ssh-ms")
		add("warm remote call: kaimon --host h1 list --json", f1(rm)+" ms", "local "+f1(l)+" ms", plus(rm-l)+" ms", "≤ +5 ms", verdict(rm-l <= 5))
		add("  remote call ÷ bare ssh h1 true", "", "ssh "+f1(s)+" ms", fx(rm/s), "≤ 0.50×", verdict(rm/s <= 0.5))
	}
	// The relay: beside the floor (json.Valid over the lines in
	// memory) and beside the bare reader of the same agent (the least any
	// reader of its pipe costs on this machine).
	reader := func(name, label string) {
		v, _ := r.get(name, "lines/cpu-s")
		rd, ok := r.get(name, "reader-lines/cpu-s")
		if !ok {
			return
		}
		fl, _ := r.get(name, "floor-lines/s")
		add("  bare reader of the same agent"+label+" (bufio, json.Valid)", kfmt(rd)+" lines/cpu-s", "json.Valid "+kfmt(fl)+" lines/s", pct(rd/fl), "", "")
		add("  relay ÷ bare reader", "", "bare reader "+kfmt(rd)+" lines/cpu-s", pct(v/rd), "", "")
	}
	relay := func(name, figure, target string, noDrops bool, readerLabel string) {
		v, ok := r.get(name, "lines/cpu-s")
		if !ok {
			return
		}
		fl, _ := r.get(name, "floor-lines/s")
		w, _ := r.get(name, "env/s")
		d, _ := r.get(name, "dropped/turn")
		add(figure, kfmt(v)+" lines/cpu-s, "+kfmt(w)+" env/s, dropped "+fmt.Sprintf("%.0f", d)+"/turn",
			"json.Valid "+kfmt(fl)+" lines/s", pct(v/fl), target, verdict(v/fl >= 0.6 && (!noDrops || d == 0)))
		reader(name, readerLabel)
	}
	relay("Relay/procs=all", "relay per core: map+stamp+log+publish→1 sub", "≥ 60% of floor", false, "")
	relay("Relay/procs=1", "relay, daemon on one P (GOMAXPROCS=1)", "≥ 60%, no drops", true, ", on one P")
	relay("Relay/burst", "relay capacity: agent writes 64 KiB bursts", "≥ 60% of floor", false, ", bursts")
	if v, ok := r.get("MapEncode/map+encode", "lines/s"); ok {
		fl, _ := r.get("MapEncode/floor", "lines/s")
		add("Mapper.Map + envelope encode, one core", kfmt(v)+" lines/s", "json.Valid "+kfmt(fl)+" lines/s", pct(v/fl), "≥ 80% of floor", verdict(v/fl >= 0.8))
		a, _ := r.get("MapEncode/map+encode", "allocs/op")
		by, _ := r.get("MapEncode/map+encode", "B/op")
		add("  allocations per line", fmt.Sprintf("%.0f allocs, %.0f B", a, by), "", "", "≤ 1 alloc", verdict(a <= 1))
	}
	// Latency, agent stdout → subscriber.
	var lat []string
	for name := range r {
		if strings.HasPrefix(name, "Latency/") {
			lat = append(lat, name)
		}
	}
	slices.SortFunc(lat, func(a, b string) int { return latKey(a) - latKey(b) })
	busP99, busOK := r.get("BusLatency", "p99-µs")
	for _, name := range lat {
		p50, _ := r.get(name, "p50-µs")
		p99, _ := r.get(name, "p99-µs")
		p999, _ := r.get(name, "p999-µs")
		label := strings.NewReplacer("Latency/", "", "/", ", ", "rate=full", "full speed", "rate=", "").Replace(name)
		if !strings.Contains(label, "full") {
			label += "/s each"
		}
		floor := ""
		if busOK {
			floor = "bus alone p99 " + msf(busP99)
		}
		measured := "p50 " + msf(p50) + ", p99 " + msf(p99) + ", p999 " + msf(p999)
		d, _ := r.get(name, "dropped/round")
		if d > 0 {
			measured += fmt.Sprintf("; bus dropped %.0f/round", d)
		}
		if c, ok := r.get(name, "daemon-cores"); ok {
			m, _ := r.get(name, "machine-busy%")
			measured += fmt.Sprintf("; daemon %.2f cores, machine %.0f%% busy", c, m)
		}
		add("agent→subscriber latency, "+label, measured, floor, "", "p99 ≤ 2 ms, no drops", verdict(p99 <= 2000 && d == 0))
	}
	// One kaimon tail of an agent at full speed (issue 18): every delta
	// received, and the result as soon as through a bare pipe, or nearly.
	if got, ok := r.get("Tail", "received/turn"); ok {
		d, _ := r.get("Tail", "deltas/turn")
		tm, _ := r.get("Tail", "tail-ms")
		pm, _ := r.get("Tail", "pipe-ms")
		p, _ := r.get("Tail", "%pipe")
		add("kaimon tail of a turn of "+kfmt(d)+" deltas: received", fmt.Sprintf("%.0f", got), fmt.Sprintf("%.0f deltas", d), pct(got/d), "every delta", verdict(got >= d))
		add("  its result reaches tail", fmt.Sprintf("%.0f ms", tm), fmt.Sprintf("bare pipe %.0f ms", pm), fmt.Sprintf("%.0f%%", p), "≥ 60% of the pipe's pace", verdict(p >= 60))
	}
	// A merged tail of two hosts (issue 19), over real ssh to the netns
	// hosts and over the ssh stand-in, each beside a tail of as many
	// agents on this machine's bus, same run.
	for _, via := range []struct{ name, how string }{{"ssh", "real ssh, netns hosts"}, {"hosts", "ssh stand-in"}} {
		b := "TailAllHosts/via=" + via.name
		p99, ok := r.get(b, "p99-µs")
		if !ok {
			continue
		}
		p50, _ := r.get(b, "p50-µs")
		auth, _ := r.get(b, "lost-auth")
		deltas, _ := r.get(b, "lost-deltas/round")
		floor := ""
		if b99, ok := r.get("TailAllHosts/via=bus", "p99-µs"); ok {
			floor = "bus tail, as many agents here, p99 " + msf(b99)
			if c, ok := r.get("TailAllHosts/via=bus", "tail-cpu-ms/round"); ok {
				floor += fmt.Sprintf(", tail CPU %.0f ms/round", c)
			}
		}
		measured := fmt.Sprintf("p50 %s, p99 %s; authoritative lost %.0f, deltas lost %.0f/round", msf(p50), msf(p99), auth, deltas)
		if c, ok := r.get(b, "tail-cpu-ms/round"); ok {
			measured += fmt.Sprintf("; tail CPU %.0f ms/round", c)
		}
		add("tail --all-hosts: 2 hosts × 10 agents × 500/s ("+via.how+")", measured, floor, "", "p99 ≤ 50 ms, none lost", verdict(p99 <= 50000 && auth == 0))
	}
	// The bus alone and a stalled subscriber.
	if v, ok := r.get("BusThroughput/subscribers=1", "env/s"); ok {
		add("bus alone: 1 subscriber, throughput", kfmt(v)+" env/s", "", "", "", "")
	}
	if busOK {
		p50, _ := r.get("BusLatency", "p50-µs")
		add("bus alone: publish→receive, one at a time", "p50 "+msf(p50)+", p99 "+msf(busP99), "", "", "", "")
	}
	if v, ok := r.get("BusStalledSubscriber", "ratio"); ok {
		a, _ := r.get("BusStalledSubscriber", "alone-ms")
		d, _ := r.get("BusStalledSubscriber", "dropped/turn")
		add("claude turn of 5000 deltas + a stalled subscriber", fmt.Sprintf("%.0f ms (%.0f dropped)", a*v, d), "alone "+fmt.Sprintf("%.0f ms", a), fx(v), "", "")
	}
	// Memory.
	var idle []int
	for unit := range r["Memory"] {
		if n, err := strconv.Atoi(strings.TrimPrefix(unit, "MB-idle")); err == nil && strings.HasPrefix(unit, "MB-idle") {
			idle = append(idle, n)
		}
	}
	slices.Sort(idle)
	for _, n := range idle {
		v, _ := r.get("Memory", fmt.Sprintf("MB-idle%d", n))
		target, met := "", ""
		if n == 1000 {
			target, met = "≤ 40 MB", verdict(v <= 40)
		}
		add(fmt.Sprintf("daemon RSS, idle agents: %d", n), f1(v)+" MB", "", "", target, met)
	}
	if v, ok := r.get("Memory", "KB/agent"); ok {
		add("  RSS per idle agent (slope)", fmt.Sprintf("%.0f KB", v), "", "", "", "")
	}
	for unit := range r["Memory"] {
		if !strings.HasPrefix(unit, "MB-turns") || unit == "MB-turns0" {
			continue
		}
		after, _ := r.get("Memory", unit)
		before, _ := r.get("Memory", "MB-turns0")
		grown, _ := r.get("Memory", "MB-grown")
		add("daemon RSS after "+strings.TrimPrefix(unit, "MB-turns")+" turns on one agent", f1(after)+" MB", "before "+f1(before)+" MB", plus(grown)+" MB", "flat (grown < 1 MB)", verdict(grown < 1))
		for w := range r["Memory"] {
			if n, ok := strings.CutPrefix(w, "MB-grown-after"); ok {
				warm, _ := r.get("Memory", w)
				add("  same, grown after the first "+n+" turns", plus(warm)+" MB", "", "", "flat (grown < 1 MB)", verdict(warm < 1))
			}
		}
	}
	// An over-long agent line: the target holds for every run, so the
	// worst run is the figure.
	if v := r["LongLine"]["MB-peak"]; len(v) > 0 {
		worst := slices.Max(v)
		opened, _ := r.get("LongLine", "MB-opened")
		line, _ := r.get("LongLine", "MB-line")
		add(fmt.Sprintf("daemon peak RSS, an agent line of %.0f MB (worst of %d)", line, len(v)), f1(worst)+" MB", "agent opened "+f1(opened)+" MB", "", "≤ 100 MB every run", verdict(worst <= 100))
	}
	// kaimon diff of a worktree holding a gigabyte of untracked text
	// (issue 27): the daemon's peak over its idle.
	for _, c := range []struct{ name, how string }{
		{"DiffLargeFile/one-file", "in one file (named with its size)"},
		{"DiffLargeFile/under-limit", "in files under the limit (streamed)"},
	} {
		peak, ok := r.get(c.name, "MB-peak")
		if !ok {
			continue
		}
		idle, _ := r.get(c.name, "MB-idle")
		files, _ := r.get(c.name, "MB-files")
		add(fmt.Sprintf("daemon peak RSS, kaimon diff of %.0f MB of untracked text %s", files, c.how), f1(peak)+" MB", "idle "+f1(idle)+" MB", "",
			"≤ 100 MB over idle", verdict(peak-idle <= 100))
	}
	// The event log.
	if v, ok := r.get("Append/nosync", "ns/op"); ok {
		s, _ := r.get("Append/fsync", "ns/op")
		a, _ := r.get("Append/nosync", "allocs/op")
		add("event log append, one record, no fsync", fmt.Sprintf("%.1f µs, %.0f allocs", v/1e3, a), "", "", "", "")
		add("event log append + fsync (kaimon: once a turn)", fmt.Sprintf("%.0f µs", s/1e3), "no fsync "+fmt.Sprintf("%.1f µs", v/1e3), fx(s/v), "", "")
	}
	for _, s := range skips {
		add(s.name+": SKIPPED", s.why, "", "", "", "NOT RUN")
	}
	return rows
}

func latKey(name string) int {
	var n, rate int
	fmt.Sscanf(strings.TrimPrefix(name, "Latency/agents="), "%d", &n)
	if i := strings.Index(name, "rate="); i >= 0 {
		rate, _ = strconv.Atoi(name[i+5:])
	}
	return rate*1000 + n // full speed (0) first, then by agents
}

func print(rows []row) {
	head := row{"figure", "measured", "floor / bare, same run", "ratio", "target", "met?"}
	all := append([]row{head}, rows...)
	w := make([]int, 6)
	cells := func(r row) []string { return []string{r.figure, r.measured, r.floor, r.ratio, r.target, r.met} }
	for _, r := range all {
		for i, c := range cells(r) {
			w[i] = max(w[i], len([]rune(c)))
		}
	}
	line := func(r row) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells(r) {
			b.WriteString(" " + c + strings.Repeat(" ", w[i]-len([]rune(c))) + " |")
		}
		fmt.Println(b.String())
	}
	line(head)
	var b strings.Builder
	b.WriteString("|")
	for i := range w {
		b.WriteString(strings.Repeat("-", w[i]+2) + "|")
	}
	fmt.Println(b.String())
	for _, r := range rows {
		line(r)
	}
}

func f1(v float64) string   { return strconv.FormatFloat(v, 'f', 1, 64) }
func plus(v float64) string { return fmt.Sprintf("%+.1f", v) }
func fx(v float64) string   { return fmt.Sprintf("%.2f×", v) }
func pct(v float64) string  { return fmt.Sprintf("%.0f%%", 100*v) }
func msf(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.1f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}
func kfmt(v float64) string {
	if v >= 1e6 {
		return fmt.Sprintf("%.2fM", v/1e6)
	}
	return fmt.Sprintf("%.0fk", v/1e3)
}
