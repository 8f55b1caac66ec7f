// Command fakeclaude stands in for the claude CLI in kaimon's benchmarks
// (point KAIMON_CLAUDE_BIN at it). It ignores its arguments, answers every
// control request on stdin with success, and answers each user message
// with a turn of "stream N chunks" text deltas (default 1) written at full
// speed (or paced: "… at R/s"), one write per line, as the claude CLI
// writes them, each delta stamped with its send time: see package
// fakeclaude. "… in bursts" renders the turn whole first and writes it in
// 64 KiB blocks, so that it outruns any reader. Idle, it only waits on
// stdin, so a thousand of them cost little.
//
// With the one argument --sink it is instead the benchmarks' bare reader
// of an agent: it reads stdin line by line (bufio), checks each line with
// json.Valid, and at EOF prints "lines N invalid M cpu-ns C", C being the
// CPU time it used from its first line on (its start, the Go runtime's,
// not counted). What it costs in CPU per line, reading a fakeclaude at
// its pace through a pipe, is the least any reader of that agent can cost
// on the machine: the floor beside which the relay's cost is read.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/kaimon/kaimon/internal/testutil/fakeclaude"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--sink" {
		sink()
		return
	}
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := os.Stdout
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			handle(out, line)
		}
		if err != nil {
			return
		}
	}
}

func handle(out *os.File, line []byte) {
	var msg struct {
		Type      string `json:"type"`
		RequestID string `json:"request_id"`
		Message   struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(line, &msg) != nil {
		return
	}
	switch msg.Type {
	case "control_request":
		fmt.Fprintf(out, `{"type":"control_response","response":{"subtype":"success","request_id":%q,"response":{}}}`+"\n", msg.RequestID)
	case "user":
		text := ""
		for _, c := range msg.Message.Content {
			text += c.Text
		}
		if fakeclaude.Burst(text) {
			var buf []byte
			fakeclaude.Turn(fakeclaude.Chunks(text), nil, func(l []byte) { buf = append(buf, l...) })
			for len(buf) > 0 {
				n := min(len(buf), 64<<10)
				if _, err := out.Write(buf[:n]); err != nil {
					os.Exit(1)
				}
				buf = buf[n:]
			}
			return
		}
		fakeclaude.PacedTurn(fakeclaude.Chunks(text), fakeclaude.Rate(text), nil, func(l []byte) {
			if _, err := out.Write(l); err != nil {
				os.Exit(1)
			}
		})
	}
}

// sink reads stdin's lines to its end, checking each with json.Valid, and
// prints how many there were and how many were not JSON.
func sink() {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	var long []byte // a line longer than the buffer, gathered
	lines, invalid := 0, 0
	var start time.Duration
	for {
		l, err := in.ReadSlice('\n')
		if lines == 0 && start == 0 {
			start = cpuTime()
		}
		if err == bufio.ErrBufferFull {
			long = append(long, l...)
			continue
		}
		if long != nil {
			l, long = append(long, l...), nil
		}
		if len(l) > 0 {
			lines++
			if !json.Valid(l) {
				invalid++
			}
		}
		if err != nil {
			break
		}
	}
	fmt.Printf("lines %d invalid %d cpu-ns %d\n", lines, invalid, cpuTime()-start)
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
