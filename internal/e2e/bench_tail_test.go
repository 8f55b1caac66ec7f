package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/testutil/fakeclaude"
	"github.com/kaimon/kaimon/internal/verbs"
)

// BenchmarkTail measures whether `kaimon tail agent:ID` keeps up with its
// agent (issue 18): fakeclaude writes a turn of KAIMON_BENCH_TAIL_CHUNKS
// text deltas (default 200000) as fast as it can, one write a line, and
// one plain `kaimon tail agent:ID` prints it. One op is one turn.
//
//	received/turn  the turn's text deltas tail printed (the bus drops for
//	               a reader that falls behind; the target is all of them)
//	deltas/turn    the text deltas of the turn (its chunks, and the few of
//	               its second text block)
//	tail-ms        from agent_send to tail's printing of the turn's result
//	pipe-ms        the same lines through a bare pipe, measured in the same
//	               op: fakeclaude's turn into `fakeclaude --sink` (bufio
//	               lines, json.Valid each), from its start to the sink's end
//	%pipe          pipe-ms as a share of tail-ms (the target: ≥ 60)
//
// What tail prints is read here as it comes, with a byte scan per line,
// so that this reader is not what falls behind.
func BenchmarkTail(b *testing.B) {
	chunks := envInt("KAIMON_BENCH_TAIL_CHUNKS", 200000)
	e := newFakeEnv(b)
	e.ok("daemon", "start")
	cl := e.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o, err := cl.Open(ctx, &verbs.OpenArgs{Cwd: e.work})
	if err != nil {
		b.Fatal(err)
	}
	id := o.AgentID
	tail := startTailReader(b, e, id)
	e.waitTopic("agent:"+id, 1)
	text := fmt.Sprintf("stream %d chunks", chunks)
	lines := fakeclaude.Lines(chunks)
	deltas := 0
	for _, l := range lines {
		if bytes.Contains(l, []byte(`"text_delta"`)) {
			deltas++
		}
	}
	var (
		tailD, pipeD time.Duration
		received     int
	)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := cl.Send(ctx, &verbs.SendArgs{AgentID: id, Text: text}); err != nil {
			b.Fatal(err)
		}
		r := tail.turn(b, i+1)
		tailD += r.at.Sub(t0)
		received += r.deltas
		b.StopTimer()
		pipeD += barePipe(b, text, len(lines))
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(received)/float64(b.N), "received/turn")
	b.ReportMetric(float64(deltas), "deltas/turn")
	b.ReportMetric(float64(tailD.Milliseconds())/float64(b.N), "tail-ms")
	b.ReportMetric(float64(pipeD.Milliseconds())/float64(b.N), "pipe-ms")
	b.ReportMetric(100*pipeD.Seconds()/tailD.Seconds(), "%pipe")
	if _, err := cl.Close(ctx, &verbs.CloseArgs{AgentID: id}); err != nil {
		b.Fatal(err)
	}
}

// tailReader reads a `kaimon tail`'s stdout and tells each turn's result,
// with the text deltas of that turn it printed before it.
type tailReader struct {
	results chan tailTurn
	stderr  syncBuffer
	cmd     *exec.Cmd
}

type tailTurn struct {
	turn   int
	deltas int
	at     time.Time
}

func startTailReader(b *testing.B, e *kenv, id string) *tailReader {
	tr := &tailReader{results: make(chan tailTurn, 16)}
	tr.cmd = exec.Command(filepath.Join(binDir, "kaimon"), "tail", "agent:"+id)
	tr.cmd.Env, tr.cmd.Dir, tr.cmd.Stderr = e.env, e.work, &tr.stderr
	tr.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := tr.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := tr.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(tr.results)
		br := bufio.NewReaderSize(out, 1<<20)
		deltas := 0
		for {
			line, err := br.ReadSlice('\n')
			if err == bufio.ErrBufferFull {
				rest, err2 := br.ReadBytes('\n')
				line, err = append(line, rest...), err2
			}
			if err != nil {
				_, _ = io.Copy(io.Discard, br)
				return
			}
			switch event.Kind(gjson.GetBytes(line, "kind").Str) {
			case event.AssistantText:
				if gjson.GetBytes(line, "data.delta").Bool() {
					deltas++
				}
			case event.Result:
				tr.results <- tailTurn{turn: int(gjson.GetBytes(line, "turn").Int()), deltas: deltas, at: time.Now()}
				deltas = 0
			}
		}
	}()
	b.Cleanup(func() {
		_ = syscall.Kill(-tr.cmd.Process.Pid, syscall.SIGKILL)
		<-done
		_ = tr.cmd.Wait()
	})
	return tr
}

// turn waits for the result of turn n.
func (tr *tailReader) turn(b *testing.B, n int) tailTurn {
	b.Helper()
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case r, ok := <-tr.results:
			if !ok {
				b.Fatalf("kaimon tail ended before the result of turn %d; stderr:\n%s", n, tr.stderr.String())
			}
			if r.turn == n {
				return r
			}
		case <-timeout:
			b.Fatalf("no result of turn %d from kaimon tail in 5 minutes", n)
		}
	}
}

// barePipe runs fakeclaude's turn for text into `fakeclaude --sink`
// through a pipe and returns the wall time from the start of both to the
// sink's end, having checked that it read want lines, all JSON.
func barePipe(b *testing.B, text string, want int) time.Duration {
	b.Helper()
	wall, _ := sinkRun(b, "bare pipe", text, nil, want)
	return wall
}
