package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"

	"github.com/kaimon/kaimon/internal/event"
)

// Watcher reads a stream of envelopes. Next returns io.EOF at the end of a
// stream that does not follow.
type Watcher struct {
	body io.ReadCloser
	br   *bufio.Reader
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
