package playground

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// stream writes an action's events as NDJSON, flushing each: the page
// shows output as the sandbox produces it.
type stream struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	rc   *http.ResponseController
	sent bool
}

// started reports whether an event was sent (the answer's status, 200,
// is then gone out).
func (st *stream) started() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.sent
}

func newStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	return &stream{w: w, rc: http.NewResponseController(w)}
}

func (st *stream) send(ev event) {
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sent = true
	st.w.Write(append(data, '\n'))
	st.rc.Flush()
}

// chunk passes a piece of output on.
func (st *stream) chunk(c goruntime.Chunk) {
	st.send(event{Kind: string(c.Stream), Text: string(c.Data)})
}

// fail ends the answer with an error event.
func (st *stream) fail(err error) {
	st.send(event{Kind: "error", Text: err.Error()})
}
