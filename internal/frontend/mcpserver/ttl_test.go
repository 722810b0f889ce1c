package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// ttl_seconds 0 is the default TTL, as an absent one (like
// timeout_seconds 0), and the schema and the refusal of a negative one
// say so.
func TestTTLZeroIsTheDefault(t *testing.T) {
	s, _ := newTestServer(t, Config{MaxTTL: time.Hour})
	cs := connectMemory(t, s, nil)
	if got := structured[SandboxInfo](t, mustOK(t, call(t, cs, "create_sandbox", map[string]any{"ttl_seconds": 0}))); got.TTLSeconds != defaultHandleTTL.Seconds() {
		t.Fatalf("ttl_seconds 0 made a TTL of %v s, want the default %v s", got.TTLSeconds, defaultHandleTTL.Seconds())
	}
	if res := call(t, cs, "create_sandbox", map[string]any{"ttl_seconds": -5}); !res.IsError || !strings.Contains(text(res), "0 or none for the default") {
		t.Fatalf("ttl_seconds -5: %s", text(res))
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "create_sandbox" && !strings.Contains(jsonOf(t, tool.InputSchema), "0 or absent: the default") {
			t.Errorf("create_sandbox's ttl_seconds schema does not say what 0 means: %s", jsonOf(t, tool.InputSchema))
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
