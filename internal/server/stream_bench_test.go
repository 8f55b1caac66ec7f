package server

import (
	"bufio"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/kaimon/kaimon/internal/bus"
	"github.com/kaimon/kaimon/internal/event"
)

// BenchmarkStreamRoutes is one agent's deltas through GET /v1/events (the
// bus's bytes, passed through the follower) beside GET
// /v1/agents/{id}/events (decoded envelopes, encoded again), side by
// side in one run: the hub is filled first, with a queue that drops
// nothing, and the client reads until the last seq.
func BenchmarkStreamRoutes(b *testing.B) {
	for _, route := range []struct{ name, path string }{
		{"all", "/v1/events?follow=1"},
		{"one", "/v1/agents/a1/events?since=latest&follow=1"},
	} {
		b.Run(route.name, func(b *testing.B) {
			hub := bus.NewLocal(bus.Options{QueueBytes: 1 << 30})
			defer hub.Close()
			c, _ := serveEvents(b, &fakeSvc{}, hub)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://kaimon"+route.path, nil)
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			data := event.NewText(event.AssistantText, 1, true, "a chunk of streamed text, as long as a model's token or three").Data
			envs := make([]*event.Envelope, b.N)
			for i := range envs {
				envs[i] = &event.Envelope{Kind: event.AssistantText, Turn: 1, Data: data, AgentID: "a1", Seq: uint64(i + 1), TS: time.Now().UTC()}
			}
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			hub.Publish(envs...)
			br := bufio.NewReaderSize(resp.Body, 64<<10)
			for n := 0; n < b.N; n++ {
				if _, err := br.ReadSlice('\n'); err != nil {
					b.Fatalf("after %d lines: %v", n, err)
				}
			}
		})
	}
}
