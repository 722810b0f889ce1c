package mcpserver

import (
	"strings"
	"testing"
	"time"
)

// The priming event that opens a POST stream and the event that comes
// before the server closes one carry no event name, as in MCP's transport
// text: clients that dispatch by event type (the Python SDK) see only
// message events. The priming event still carries its ID and the closing
// one its retry field.
func TestSSEEventsUnnamed(t *testing.T) {
	s, _ := newTestServer(t, Config{SSECloseAfter: 300 * time.Millisecond})
	url := httpServer(t, s)
	const pv = "2025-11-25"
	init := mustPost(t, url, pv, "",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	session := init.Header.Get("Mcp-Session-Id")
	first := <-readStream(init)
	if !strings.HasPrefix(first, "id: ") || !strings.Contains(first, "\ndata: \n\n") {
		t.Fatalf("initialize's stream does not open with a priming event (an ID, empty data): %q", first)
	}
	mustPost(t, url, pv, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	// A call outlasting SSECloseAfter has its stream closed with a retry
	// field, before its result.
	closed := <-readStream(mustPost(t, url, pv, session, runCall("sleep 1.5")))
	if !strings.Contains(closed, "\nretry: ") && !strings.HasPrefix(closed, "retry: ") {
		t.Fatalf("the long call's stream was not closed with a retry field: %q", closed)
	}
	for _, stream := range []string{first, closed} {
		for _, line := range strings.Split(stream, "\n") {
			if strings.HasPrefix(line, "event:") && line != "event: message" {
				t.Errorf("event name %q in %q", line, stream)
			}
		}
	}
}
