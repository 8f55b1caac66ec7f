package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/event"
)

// Watcher reads a stream of envelopes. Next returns io.EOF at the end of a
// stream that does not follow.
type Watcher struct {
	body io.ReadCloser
	br   *bufio.Reader
	long []byte // a line longer than br's buffer, gathered
	// Since is, for a Stream, where it starts each agent the daemon had
	// (its Kaimon-Since header): what to resume those agents from when
	// nothing of them came before the stream broke.
	Since map[string]uint64
}

// Events opens GET /v1/agents/{id}/events: agent id's envelopes after seq
// since, from its log; with follow, then its live envelopes too, joined by
// seq with no gap and no duplicate, until ctx ends or Close.
func (c *Client) Events(ctx context.Context, id string, since uint64, follow bool) (*Watcher, error) {
	return c.events(ctx, id, fmt.Sprint(since), follow)
}

// EventsFromNow follows agent id's events from its end as it is now
// (since=latest): none of its history, and, once it returns, nothing
// that happens after. Open it before causing what is to be watched.
func (c *Client) EventsFromNow(ctx context.Context, id string) (*Watcher, error) {
	return c.events(ctx, id, "latest", true)
}

func (c *Client) events(ctx context.Context, id, since string, follow bool) (*Watcher, error) {
	q := url.Values{"since": {since}}
	if follow {
		q.Set("follow", "1")
	}
	resp, err := c.roundTrip(ctx, "GET", "/v1/agents/"+url.PathEscape(id)+"/events?"+q.Encode(), nil, !c.NoAutostart)
	if err != nil {
		return nil, err
	}
	return &Watcher{body: resp.Body, br: bufio.NewReaderSize(resp.Body, 64<<10)}, nil
}

// StreamQuery is what GET /v1/events is asked for (see Client.Stream).
type StreamQuery struct {
	// Channel is agent: for every agent, agent:PREFIX for those whose ids
	// start with PREFIX; "" is agent:.
	Channel string
	// Since is, per agent, the last seq the client has: those agents'
	// envelopes start after it, from their logs. A client resuming a
	// stream names here every agent it has seen.
	Since map[string]uint64
	// History starts every other agent at the start of its log; without
	// it, at its first live envelope.
	History bool
	// NoFollow ends the stream after the logs; by default it goes on live.
	NoFollow bool
}

// Stream opens GET /v1/events: the envelopes of every agent on a channel,
// agents that appear later included, each agent's in seq order with no gap
// and no duplicate (the daemon joins them with its logs), as the daemon
// encoded them for its bus. Read them with NextRaw. It is the event bus of a
// daemon reached only through Dial (another host's); follow.Remote follows
// it and resumes it when the connection drops.
func (c *Client) Stream(ctx context.Context, sq StreamQuery) (*Watcher, error) {
	q := url.Values{}
	if sq.Channel != "" {
		q.Set("channel", sq.Channel)
	}
	if len(sq.Since) > 0 {
		q.Set("since", apitype.FormatSince(sq.Since))
	}
	if sq.History {
		q.Set("history", "1")
	}
	if !sq.NoFollow {
		q.Set("follow", "1")
	}
	resp, err := c.roundTrip(ctx, "GET", "/v1/events?"+q.Encode(), nil, !c.NoAutostart)
	if err != nil {
		return nil, err
	}
	since, err := apitype.ParseSince(resp.Header.Get(apitype.StreamSinceHeader))
	if err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: header %s: %w", c.where(), apitype.StreamSinceHeader, err)
	}
	return &Watcher{body: resp.Body, br: bufio.NewReaderSize(resp.Body, 64<<10), Since: since}, nil
}

// NextRaw returns the next envelope's line as the daemon wrote it, without
// its newline; the bytes are valid until the next call.
func (w *Watcher) NextRaw() ([]byte, error) {
	for {
		line, err := w.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: gather it whole.
			w.long = append(w.long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = w.br.ReadSlice('\n')
				w.long = append(w.long, line...)
			}
			line = w.long
		}
		if line = bytes.TrimSpace(line); len(line) > 0 && (err == nil || err == io.EOF) {
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF // a line cut short: the stream broke
			}
			return line, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Ready reports whether a whole line is buffered: NextRaw would return it
// without reading from the connection.
func (w *Watcher) Ready() bool {
	b, _ := w.br.Peek(w.br.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// Next returns the next envelope.
func (w *Watcher) Next() (*event.Envelope, error) {
	for {
		line, err := w.br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var e event.Envelope
			if jerr := json.Unmarshal(line, &e); jerr != nil {
				return nil, fmt.Errorf("event stream: %w", jerr)
			}
			return &e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Close ends the stream.
func (w *Watcher) Close() error { return w.body.Close() }

// EventLog reads agent id's envelopes from its event log, one JSON object
// a line, to its end (kaimon mcp's kaimon://agent/{id}/events).
func (c *Client) EventLog(ctx context.Context, id string) (io.ReadCloser, error) {
	w, err := c.Events(ctx, id, 0, false)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{w.br, w.body}, nil
}
