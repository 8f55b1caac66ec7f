// Command fakeclaude stands in for the claude CLI in kaimon's benchmarks
// (point KAIMON_CLAUDE_BIN at it). It ignores its arguments, answers every
// control request on stdin with success, and answers each user message
// with a turn of "stream N chunks" text deltas (default 1) written at full
// speed (or paced: "… at R/s"), one write per line, each delta stamped
// with its send time: see package fakeclaude. Idle, it only waits on
// stdin, so a thousand of them cost little.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/kaimon/kaimon/internal/testutil/fakeclaude"
)

func main() {
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
		fakeclaude.PacedTurn(fakeclaude.Chunks(text), fakeclaude.Rate(text), nil, func(l []byte) {
			if _, err := out.Write(l); err != nil {
				os.Exit(1)
			}
		})
	}
}
