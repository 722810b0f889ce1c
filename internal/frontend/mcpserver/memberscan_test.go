package mcpserver

import (
	"bytes"
	"encoding/json"
	"testing"
)

// scanPieces feeds data to a fresh memberScanner in pieces of n bytes (at
// least 1), as the frameLimiter does with read chunks.
func scanPieces(data []byte, n int) *memberScanner {
	var sc memberScanner
	if n < 1 {
		n = 1
	}
	for len(data) > 0 {
		k := min(n, len(data))
		sc.Write(data[:k])
		data = data[k:]
	}
	return &sc
}

// FuzzMemberScanner checks the scanner against encoding/json: for every
// valid JSON input fed in pieces of any size, it finds a top-level "id"
// and "method" exactly when decoding into a map does, with the same raw
// bytes (within the caps), and never mistakes a non-object for an object.
// On invalid input it only has to stay bounded and not panic.
func FuzzMemberScanner(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":1}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"run_go_code","arguments":{"files":{"a":"}{\"id\":2"}}},"id":"tail"}`,
		`{"params":{"id":7,"list":[{"id":8}]},"id" : -12.5e3 ,"method":"x"}`,
		`{"\u0069d":"esc\"aped\\","me\u0074hod":"m"}`,
		`{"id":1,"id":"second"}`,
		`{"id":{"nested":true},"method":null}`,
		`{"method":"notifications/progress","params":{}}`,
		`[{"id":1,"method":"a"},{"id":2,"method":"b"}]`,
		` "id" `,
		`{"id":[1,2, 3 ],"method":"x"}`,
		`{"id":"` + string(bytes.Repeat([]byte("x"), maxIDBytes)) + `"}`,
	} {
		f.Add([]byte(seed), uint8(1))
		f.Add([]byte(seed), uint8(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, piece uint8) {
		sc := scanPieces(data, int(piece))
		if len(sc.key) > maxKeyBytes || len(sc.id) > maxIDBytes || len(sc.method) > maxMethodBytes {
			t.Fatalf("scanner kept more than its caps: key %d, id %d, method %d", len(sc.key), len(sc.id), len(sc.method))
		}
		sc.requestID()
		sc.methodName()
		if !json.Valid(data) {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			if sc.object {
				t.Fatalf("scanner took %q for an object; encoding/json: %v", data, err)
			}
			return
		}
		if !sc.object {
			t.Fatalf("scanner missed the object %q", data)
		}
		check := func(name string, has bool, got json.RawMessage, max int) {
			want, ok := m[name]
			if has != ok {
				t.Fatalf("%q: scanner has %s=%v, encoding/json %v", data, name, has, ok)
			}
			if !ok {
				return
			}
			if len(want) > max {
				if got != nil {
					t.Fatalf("%q: %s of %d bytes is over the cap but the scanner kept %q", data, name, len(want), got)
				}
				return
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%q: %s: scanner %q, encoding/json %q", data, name, got, want)
			}
		}
		check("id", sc.hasID, sc.id, maxIDBytes)
		check("method", sc.hasMethod, sc.method, maxMethodBytes)
	})
}

func TestMemberScannerRequestID(t *testing.T) {
	for _, tc := range []struct {
		in, id, method string
		ok             bool
	}{
		{`{"jsonrpc":"2.0","id":42,"method":"tools/call"}`, `42`, "tools/call", true},
		{`{"method":"tools/call","params":{"id":1,"s":"\"id\":3"},"id":"a\"b"}`, `"a\"b"`, "tools/call", true},
		{`{"method":"notifications/cancelled","params":{"requestId":3}}`, ``, "notifications/cancelled", false},
		{`{"id":null,"method":"x"}`, ``, "x", false},
		{`{"id":true,"method":"x"}`, ``, "x", false},
		{`{"id":{"a":1},"method":"x"}`, ``, "x", false},
		{`[{"id":1,"method":"x"}]`, ``, "", false},
		{`{"id":1,"result":{}}`, `1`, "", true},
	} {
		sc := scanPieces([]byte(tc.in), 3)
		id, ok := sc.requestID()
		if ok != tc.ok || string(id) != tc.id || sc.methodName() != tc.method {
			t.Errorf("%s: id %q ok=%v method %q; want %q %v %q", tc.in, id, ok, sc.methodName(), tc.id, tc.ok, tc.method)
		}
	}
}
