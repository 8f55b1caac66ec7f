package host

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// ReadLine never holds more than max bytes of a line, whatever the reads
// and the buffer (16 bytes here, lines across reads).
func TestReadLineBounded(t *testing.T) {
	in := strings.Repeat("x", 100) + "\nshort\n" + strings.Repeat("y", 50)
	for _, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in)), iotest.DataErrReader(strings.NewReader(in))} {
		lr := newLineReader(r, 16)
		var got []string
		for {
			line, skipped, err := lr.ReadLine(10)
			if line != nil && len(line) > 10 {
				t.Fatalf("line of %d bytes held", len(line))
			}
			got = append(got, fmt.Sprintf("%q/%d", line, skipped))
			if err != nil {
				if err != io.EOF {
					t.Errorf("err %v", err)
				}
				break
			}
		}
		want := `""/101 "short\n"/0 ""/50`
		if strings.Join(got, " ") != want {
			t.Errorf("got %s, want %s", strings.Join(got, " "), want)
		}
		if lr.held() {
			t.Error("a buffer held at the end")
		}
	}
}

// On a pipe, as an agent's stdout: short lines, a line longer than the
// read buffer, a line at the max, one over it (read past, its size
// reported, the next line whole), and the buffer given back after each
// line that empties it, long ones included.
func TestLineReaderPipe(t *testing.T) {
	const max = 3 * readBufSize
	long := strings.Repeat("l", 2*readBufSize+7) + "\n"
	atMax := strings.Repeat("m", max-1) + "\n"
	over := strings.Repeat("o", max) + "\n"
	lines := []string{"a\n", "bb\n", long, "c\n", atMax, over, "d\n"}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wrote := make(chan error, 1)
	go func() {
		defer w.Close()
		for _, l := range lines {
			if _, err := io.WriteString(w, l); err != nil {
				wrote <- err
				return
			}
		}
		_, err := io.WriteString(w, "no newline")
		wrote <- err
	}()
	lr := NewLineReader(r)
	if lr.rc == nil {
		t.Fatal("a pipe read without the poller")
	}
	for i, want := range lines {
		line, skipped, err := lr.ReadLine(max)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if want == over {
			if line != nil || skipped != int64(len(over)) {
				t.Errorf("line %d: %d bytes, %d skipped; want 0, %d", i, len(line), skipped, len(over))
			}
			continue
		}
		if !bytes.Equal(line, []byte(want)) || skipped != 0 {
			t.Errorf("line %d: %d bytes (%.10q), %d skipped; want %d bytes", i, len(line), line, skipped, len(want))
		}
	}
	line, skipped, err := lr.ReadLine(max)
	if string(line) != "no newline" || skipped != 0 || err != io.EOF {
		t.Errorf("last: %q, %d, %v; want the unterminated rest and EOF", line, skipped, err)
	}
	if lr.held() {
		t.Error("a buffer held at EOF")
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// A reader waiting for the agent holds no buffer: after each line, a long
// one included, the next call gives the buffer back before it waits. (The
// line it returned may lie in the buffer until then.)
func TestLineReaderGivesBack(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	lr := NewLineReader(r)
	type read struct {
		line string
		err  error
	}
	lines := make(chan read)
	go func() {
		for {
			line, _, err := lr.ReadLine(10 * readBufSize)
			lines <- read{string(line), err} // copied before the next call
			if err != nil {
				return
			}
		}
	}()
	defer func() { // end the reader
		r.Close()
		for rd := range lines {
			if rd.err != nil {
				return
			}
		}
	}()
	for _, want := range []string{"short\n", strings.Repeat("x", 5*readBufSize) + "\n", "short again\n"} {
		if _, err := io.WriteString(w, want); err != nil {
			t.Fatal(err)
		}
		if rd := <-lines; rd.err != nil || rd.line != want {
			t.Fatalf("%d bytes, %v; want %d bytes", len(rd.line), rd.err, len(want))
		}
		// The reader is now on its way to wait for the next line: it
		// must get there without a buffer.
		deadline := time.Now().Add(10 * time.Second)
		for lr.held() {
			if time.Now().After(deadline) {
				t.Fatalf("after a line of %d bytes: waiting for the next with a read buffer held", len(want))
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// A reader cut off (its file closed under it, a straggler's stdout) ends
// with an error, holding nothing.
func TestLineReaderClosed(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	lr := NewLineReader(r)
	r.Close()
	if line, _, err := lr.ReadLine(100); err == nil || line != nil {
		t.Errorf("read %q, %v from a closed pipe", line, err)
	}
	if lr.held() {
		t.Error("a buffer held")
	}
}

// Lines that lie whole in the read buffer with more after them are handed
// out in place, without an allocation; the buffer's last line is copied
// and the buffer given back. Each line is right until the next call.
func TestLineReaderInPlace(t *testing.T) {
	var in strings.Builder
	var want []string
	for i := range 200 {
		l := fmt.Sprintf("{\"n\":%d,\"pad\":%q}\n", i, strings.Repeat("p", i%37))
		want = append(want, l)
		in.WriteString(l)
	}
	lr := NewLineReader(strings.NewReader(in.String()))
	for i, w := range want {
		line, skipped, err := lr.ReadLine(1 << 20)
		if string(line) != w || skipped != 0 || err != nil {
			t.Fatalf("line %d: %q, %d, %v; want %q", i, line, skipped, err, w)
		}
		if i < len(want)-1 && !lr.held() {
			t.Fatalf("line %d: the buffer was given back with lines left in it", i)
		}
	}
	if lr.held() {
		t.Error("the buffer held after its last line")
	}
	// In place: no allocation for a line with more read after it.
	lr = NewLineReader(strings.NewReader(strings.Repeat("{\"a\":1}\n", 1000)))
	if _, _, err := lr.ReadLine(100); err != nil { // takes the buffer
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(500, func() {
		if line, _, err := lr.ReadLine(100); err != nil || string(line) != "{\"a\":1}\n" {
			t.Fatalf("%q, %v", line, err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per line handed out in place, want 0", n)
	}
}

// xs is an agent's stdout printing n bytes of 'x' and no newline, then
// rest, without holding any of it: the bytes the test measures are the
// reader's alone.
type xs struct {
	n    int
	rest string
}

func (x *xs) Read(p []byte) (int, error) {
	if x.n > 0 {
		c := min(len(p), x.n)
		for i := range p[:c] {
			p[i] = 'x'
		}
		x.n -= c
		return c, nil
	}
	if x.rest == "" {
		return 0, io.EOF
	}
	c := copy(p, x.rest)
	x.rest = x.rest[c:]
	return c, nil
}

// A line far over the bound costs the reader at most the bound, gathered
// once and never copied as it grows (issue 18: append's doublings took a
// 300 MB line to twice the 64 MiB bound in the daemon). The bytes counted
// are every allocation made while reading it.
func TestReadLineOverlongCostsTheBound(t *testing.T) {
	const bound = 4 << 20
	x := &xs{n: 16 * bound, rest: "\nok\n"}
	lr := NewLineReader(x)
	readBufs.Put(readBufs.Get()) // the pool's buffer is not the line's cost
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	line, skipped, err := lr.ReadLine(bound)
	runtime.ReadMemStats(&after)
	if err != nil || line != nil || skipped != 16*bound+1 {
		t.Fatalf("ReadLine = %q, %d, %v; want the line skipped with its size", line, skipped, err)
	}
	// The slack over the bound and a read buffer is what -race allocates
	// on its own: it was over by 1–9 KB in one run of two.
	if got := after.TotalAlloc - before.TotalAlloc; got > bound+readBufSize+16<<10 {
		t.Errorf("reading a line of %d bytes allocated %d bytes; the bound is %d", 16*bound+1, got, bound)
	}
	if line, _, err := lr.ReadLine(bound); string(line) != "ok\n" || err != nil {
		t.Fatalf("next line = %q, %v", line, err)
	}
}

// A line within the bound but longer than the read buffer comes whole,
// through several parts and across reads, and the next line after it.
func TestReadLineGathersParts(t *testing.T) {
	for _, n := range []int{readBufSize, 3*readBufSize + 5, 10*readBufSize - 1} {
		x := &xs{n: n, rest: "\nnext\n"}
		lr := NewLineReader(iotest.HalfReader(x))
		line, skipped, err := lr.ReadLine(10 * readBufSize)
		if err != nil || skipped != 0 || len(line) != n+1 || strings.Count(string(line), "x") != n || line[n] != '\n' {
			t.Fatalf("%d bytes: line of %d, skipped %d, %v", n, len(line), skipped, err)
		}
		if line, _, err := lr.ReadLine(10 * readBufSize); string(line) != "next\n" || err != nil {
			t.Fatalf("%d bytes: next line = %q, %v", n, line, err)
		}
	}
}

// An ordinary line cut by the end of a read is gathered in a part sized
// by the line, not by the read buffer: each was a 64 KiB allocation, a
// tenth of what a bursting agent's reader allocated (issue 18).
func TestReadLineCutCostsTheLine(t *testing.T) {
	const lines, size = 1000, 100
	text := strings.Repeat(strings.Repeat("x", size-1)+"\n", lines)
	lr := NewLineReader(&chunked{r: strings.NewReader(text), n: size * 3 / 2}) // reads that end mid-line
	readBufs.Put(readBufs.Get())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range lines {
		line, _, err := lr.ReadLine(readBufSize)
		if err != nil || len(line) != size {
			t.Fatalf("line %d: %q, %v", i, line, err)
		}
	}
	runtime.ReadMemStats(&after)
	// About 1 KiB a line here (some 6 KiB under -race, which allocates
	// on its own); a 64 KiB part a read was 43 KiB a line.
	if got := after.TotalAlloc - before.TotalAlloc; got > lines*readBufSize/4 {
		t.Errorf("reading %d lines of %d bytes, each cut, allocated %d bytes: %d a line", lines, size, got, got/lines)
	}
}

// chunked reads at most n bytes at a time from r.
type chunked struct {
	r io.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }
