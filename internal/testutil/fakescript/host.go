package fakescript

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Host is the HTTP side every fake model server shares: a listener on
// loopback, the requests it recorded (of type R), an optional log, and a
// Close that ends streams in progress (Done) and waits for their handlers.
type Host[R any] struct {
	name string
	ln   net.Listener
	srv  *http.Server
	url  string
	done chan struct{}
	once sync.Once

	hmu    sync.Mutex // guards closed and wg.Add
	closed bool
	wg     sync.WaitGroup // running handlers

	mu   sync.Mutex
	reqs []R
	logw io.Writer
}

// Listen binds addr (host:port; 127.0.0.1:0 for a free port); Serve then
// starts serving. They are two steps so that a fake can embed the Host
// before its handler runs. name prefixes errors and log lines.
func Listen[R any](name, addr string) (*Host[R], error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen: %w", name, err)
	}
	h := &Host[R]{name: name, ln: ln, done: make(chan struct{})}
	tcp := ln.Addr().(*net.TCPAddr)
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	h.url = "http://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port))
	return h, nil
}

// Serve starts serving handler.
func (h *Host[R]) Serve(handler http.HandlerFunc) {
	h.srv = &http.Server{
		Handler:           h.guard(handler),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go h.srv.Serve(h.ln) //nolint:errcheck // returns ErrServerClosed on Close
}

// guard counts running handlers, so that Close can wait for them, and
// refuses requests once closing.
func (h *Host[R]) guard(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h.hmu.Lock()
		if h.closed {
			h.hmu.Unlock()
			return
		}
		h.wg.Add(1)
		h.hmu.Unlock()
		defer h.wg.Done()
		next(w, r)
	}
}

// BaseURL is http://127.0.0.1:PORT.
func (h *Host[R]) BaseURL() string { return h.url }

// Done is closed when Close begins: streams in progress end on it.
func (h *Host[R]) Done() <-chan struct{} { return h.done }

// Close stops the server, ends streams in progress and waits for their
// handlers to return. It may be called more than once.
func (h *Host[R]) Close() {
	h.once.Do(func() {
		h.hmu.Lock()
		h.closed = true
		close(h.done)
		h.hmu.Unlock()
		h.srv.Close()
		h.wg.Wait()
	})
}

// Record appends a request and returns how many there are now (the
// request's number, from 1).
func (h *Host[R]) Record(r R) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reqs = append(h.reqs, r)
	return len(h.reqs)
}

// Requests returns the recorded requests, in order.
func (h *Host[R]) Requests() []R {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]R(nil), h.reqs...)
}

// SetLog makes the server write one line per request to w (nil: no log).
func (h *Host[R]) SetLog(w io.Writer) {
	h.mu.Lock()
	h.logw = w
	h.mu.Unlock()
}

// Logf writes one log line, when a log is set.
func (h *Host[R]) Logf(format string, args ...any) {
	h.mu.Lock()
	w := h.logw
	h.mu.Unlock()
	if w != nil {
		fmt.Fprintf(w, h.name+": "+format+"\n", args...)
	}
}
