package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/kaimon/kaimon/internal/event"
	"github.com/kaimon/kaimon/internal/verbs"
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
	q := url.Values{"since": {fmt.Sprint(since)}}
	if follow {
		q.Set("follow", "1")
	}
	u := "http://kaimon/v1/agents/" + url.PathEscape(id) + "/events?" + q.Encode()
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.http().Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			if attempt == 0 && isDown(err) {
				if err := c.ensureDaemon(ctx, err); err != nil {
					return nil, err
				}
				continue
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &DaemonDownError{Socket: c.Paths.Socket(), Err: err, Hint: "is kaimon-agentd running? try `kaimon daemon status`"}
		}
		if resp.StatusCode/100 != 2 {
			defer resp.Body.Close()
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			var e verbs.Error
			if json.Unmarshal(data, &e) != nil || e.Message == "" {
				return nil, &verbs.Error{Code: verbs.CodeInternal, Message: fmt.Sprintf("daemon answered %s: %s", resp.Status, bytes.TrimSpace(data))}
			}
			return nil, &e
		}
		return &Watcher{body: resp.Body, br: bufio.NewReaderSize(resp.Body, 64<<10)}, nil
	}
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
