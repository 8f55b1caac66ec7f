package acp

import (
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

// TestMapperUsageNote: an agent whose prompt responses carry no usage
// (codex-acp 0.16.0 sends only usage_update {used, size}) is said to report
// none, with its context size; one response with usage makes the figures
// real.
func TestMapperUsageNote(t *testing.T) {
	m := NewMapper()
	if n := m.UsageNote(); n != "" {
		t.Fatalf("before any turn: %q", n)
	}
	m.Push(1, "hi")
	m.Update(sdk.SessionNotification{Update: sdk.SessionUpdate{UsageUpdate: &sdk.SessionUsageUpdate{Used: 49, Size: 258400}}})
	m.End(sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn})
	if n, want := m.UsageNote(), "usage not reported by this agent; context size only: 49 of 258400 tokens"; n != want {
		t.Fatalf("note = %q, want %q", n, want)
	}
	m.Push(2, "again")
	m.End(sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn, Usage: &sdk.Usage{InputTokens: 3, OutputTokens: 4, TotalTokens: 7}})
	if n := m.UsageNote(); n != "" {
		t.Fatalf("after a counted turn: %q", n)
	}

	m = NewMapper()
	m.Push(1, "hi")
	m.End(sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn})
	if n, want := m.UsageNote(), "usage not reported by this agent"; n != want {
		t.Fatalf("no context either: %q", n)
	}
}
