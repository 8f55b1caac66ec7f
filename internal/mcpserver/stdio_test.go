package mcpserver

import (
	"bytes"
	"testing"
)

// wireWriter writes what wire passes, whole, and nothing of what it
// drops; an empty write is no message, and is written as one.
func TestWireWriter(t *testing.T) {
	var out bytes.Buffer
	ran := 0
	ww := &wireWriter{w: &out, wire: func(p []byte) (wireAction, func(), func()) {
		if bytes.Contains(p, []byte("drop")) {
			return wireDrop, nil, func() { ran++ }
		}
		return wirePass, func() { ran++ }, nil
	}}
	for _, p := range [][]byte{{}, nil, []byte("keep\n"), []byte("drop\n")} {
		if n, err := ww.Write(p); n != len(p) || err != nil {
			t.Errorf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if out.String() != "keep\n" || ran != 4 {
		t.Errorf("wrote %q, ran %d afters; want %q and 4", out.String(), ran, "keep\n")
	}
}
