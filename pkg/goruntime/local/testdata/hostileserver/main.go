// Command hostileserver stands in for the runtime server of a sandbox
// whose commands replaced its socket: it answers the readiness probe and
// then every call the way that costs the host most (TestHostileServer).
//
//	GET  /list/big       a complete listing of 16 MiB of empty entries
//	GET  /download/big   256 MiB without Content-Length, ignoring Range
//	POST /unpack         200 at once, without reading the archive, and an endless body
//	POST /upload         reads the upload, never answers
//	GET  .../hang        never answers
package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
)

func main() {
	os.Remove("/run/sandbox/server.sock")
	os.Remove("/run/sandbox/sandboxd.sock")
	ln, err := net.Listen("unix", "/run/sandbox/server.sock")
	if err != nil {
		panic(err)
	}
	// Connectable by the host however its uid differs from ours, as the
	// real server's socket is: a hostile server wants to be talked to.
	if err := os.Chmod("/run/sandbox/server.sock", 0o666); err != nil {
		panic(err)
	}
	chunk := bytes.Repeat([]byte("A"), 64<<10)
	endless := func(w http.ResponseWriter, limit int) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // no Content-Length: chunked
		for sent := 0; limit < 0 || sent < limit; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
	h := func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/":
			w.Write([]byte("{}"))
		case strings.HasSuffix(r.URL.Path, "/hang"):
			<-r.Context().Done()
		case r.URL.Path == "/list/big":
			w.Header().Set("Content-Type", "application/json")
			entries := bytes.Repeat([]byte("{},"), 16<<20/3)
			w.Write([]byte("["))
			w.Write(entries)
			w.Write([]byte("{}]"))
		case r.URL.Path == "/download/big":
			endless(w, 256<<20)
		case r.URL.Path == "/unpack":
			endless(w, -1)
		case r.URL.Path == "/upload":
			io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}
	http.Serve(ln, http.HandlerFunc(h))
}
