package fakeapi

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Phrase is one trigger phrase of the fake, as a person types it, and what
// the fake answers to it; the package doc says the same to a test's author,
// chunk by chunk.
type Phrase struct {
	// Phrase is what to type: the trigger, then its argument as a
	// placeholder (CMD, PATH, TEXT, …).
	Phrase string
	// Does says what the reply does, its numbers formatted from the
	// constants the script uses.
	Does string
	// trigger is the substring the script matches ("" for "stream N
	// chunks", which streamChunksRE matches).
	trigger string
}

// Phrases are the fake's trigger phrases, the table script matches from:
// the playgrounds print it (fakeapi -phrases), so that their banners say
// what the fake does and cannot drift from it.
var Phrases = []Phrase{
	{"please use a tool", fmt.Sprintf("runs Bash `%s`, then says what it printed", ToolCommand), TriggerTool},
	{"run command: CMD", "runs Bash CMD (the rest of the line)", TriggerRunCommand},
	{"run commands: A ;; B ;; …", "runs Bash A, then B, … in one turn", TriggerRunCommands},
	{"please write a file PATH", fmt.Sprintf("writes %q and a newline to PATH (Write)", strings.TrimSuffix(WrittenContent, "\n")), TriggerWriteFile},
	{"please read PATH", "reads PATH (Read)", TriggerRead},
	{"please think", fmt.Sprintf("thinks, then answers %q", ThinkText), TriggerThink},
	{"please be slow", fmt.Sprintf("replies in %d chunks, one every %s: %s in all (an interrupt stops it)",
		SlowChunks, SlowChunkDelay, SlowChunks*SlowChunkDelay), TriggerSlow},
	{"please hold", fmt.Sprintf("replies %q, then holds the rest until a test releases it (interrupt it)", HoldFirst), TriggerHold},
	{"stream N chunks", "replies in N chunks at once (for benchmarks)", ""},
	{"please break off", fmt.Sprintf("the stream breaks after %d chunks, the CLI's retry gets the whole reply (… every time: the retry breaks too)",
		breakAfter), TriggerBreak},
	{"please fail", fmt.Sprintf("the API fails: HTTP 500 %q", FailMessage), TriggerFail},
	{"say exactly: TEXT", "replies TEXT (the rest of the message)", TriggerSayExactly},
	{"call tool: NAME JSON", "calls the tool NAME with the input JSON, e.g. call tool: mcp__kaimon__agent_list {}", TriggerCallTool},
}

// WritePhrases writes the table, one phrase a line with what it does,
// each line after indent; last, what any other message gets.
func WritePhrases(w io.Writer, indent string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range Phrases {
		fmt.Fprintf(tw, "%s%s\t%s\n", indent, p.Phrase, p.Does)
	}
	fmt.Fprintf(tw, "%s%s\t%s\n", indent, "(anything else)", strings.Replace(defaultText, "%d", "N", 1))
	return tw.Flush()
}
