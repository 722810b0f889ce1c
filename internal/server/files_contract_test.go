// Contract tests of the file endpoints: upload, download (ranges), list,
// exists, and path safety on every endpoint.
package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// multipartBody streams a one-part upload (part "file" named filename)
// with n pseudo-random bytes from seed, and returns the body, its
// content type and a channel with the content's SHA-256.
func multipartBody(filename string, n int64, seed uint64) (io.Reader, string, <-chan [32]byte) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	sum := make(chan [32]byte, 1)
	go func() {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, filename))
		h.Set("Content-Type", "application/octet-stream")
		part, err := mw.CreatePart(h)
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		hash := sha256.New()
		if _, err := io.CopyN(io.MultiWriter(part, hash), randReader(seed), n); err != nil {
			pw.CloseWithError(err)
			return
		}
		sum <- [32]byte(hash.Sum(nil))
		pw.CloseWithError(mw.Close())
	}()
	return pr, mw.FormDataContentType(), sum
}

// randReader is a fast deterministic byte stream.
func randReader(seed uint64) io.Reader {
	return &chachaReader{r: rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})}
}

type chachaReader struct{ r *rand.ChaCha8 }

func (c *chachaReader) Read(p []byte) (int, error) { return c.r.Read(p) }

func (ts *testServer) upload(t testing.TB, body io.Reader, contentType string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/upload", body)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /upload: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func TestUploadDownloadLarge(t *testing.T) {
	ts := startServer(t, nil)
	const size = 100 << 20
	body, ct, sum := multipartBody("big/blob.bin", size, 7)
	// An io.Pipe body has no length: the client sends it chunked.
	code, msg := ts.upload(t, body, ct)
	if code != 200 || msg != `{"message":"File 'big/blob.bin' uploaded successfully."}`+"\n" {
		t.Fatalf("upload = %d %s", code, msg)
	}
	want := <-sum
	resp, err := http.Get(ts.URL + "/download/big%2Fblob.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("download = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil || n != size || [32]byte(h.Sum(nil)) != want {
		t.Fatalf("downloaded %d bytes (err %v), sha256 match %v; want %d identical bytes", n, err, [32]byte(h.Sum(nil)) == want, size)
	}
	entries, _ := os.ReadDir(filepath.Join(ts.Base, "big"))
	if len(entries) != 1 {
		t.Fatalf("big/ holds %v, want only blob.bin (no temp files)", entries)
	}
}

func TestUploadEdgeCases(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxUploadBytes = 1 << 20 })
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ts.Base, "planted")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ts.Base, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		size int64
		code int
		file string // where the content must land, relative to base
	}{
		{"plain.txt", 10, 200, "plain.txt"},
		{"a/b/c/deep.txt", 10, 200, "a/b/c/deep.txt"},
		{"/abs.txt", 10, 200, "abs.txt"},
		{"x/../y.txt", 10, 200, "y.txt"},
		{"exact.bin", 1 << 20, 200, "exact.bin"},
		{"toobig.bin", 1<<20 + 1, 413, ""},
		{"../escape.txt", 10, 403, ""},
		{"a/../../escape.txt", 10, 403, ""},
		{"planted/evil.txt", 10, 403, ""},
		{"adir", 10, 409, ""},
		{"plain.txt/under-a-file", 10, 409, ""},
		{".", 10, 400, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, ct, sum := multipartBody(c.name, c.size, uint64(c.size))
			code, msg := ts.upload(t, body, ct)
			if code != c.code {
				t.Fatalf("upload %q = %d %s, want %d", c.name, code, msg, c.code)
			}
			if c.file == "" {
				return
			}
			got, err := os.ReadFile(filepath.Join(ts.Base, c.file))
			if err != nil || sha256.Sum256(got) != <-sum {
				t.Fatalf("%s holds the wrong content (err %v)", c.file, err)
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("upload wrote outside the base: %v", entries)
	}
	var leftovers []string
	_ = filepath.WalkDir(ts.Base, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".upload-") {
			leftovers = append(leftovers, p)
		}
		return nil
	})
	if len(leftovers) > 0 {
		t.Fatalf("temp files left behind: %v", leftovers)
	}
	t.Run("replaces atomically and keeps mode", func(t *testing.T) {
		p := filepath.Join(ts.Base, "script.sh")
		_ = os.WriteFile(p, []byte("old"), 0o755)
		body, ct, _ := multipartBody("script.sh", 100, 1)
		if code, msg := ts.upload(t, body, ct); code != 200 {
			t.Fatalf("upload = %d %s", code, msg)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Size() != 100 || fi.Mode().Perm() != 0o755 {
			t.Fatalf("script.sh after upload: %v %v", fi, err)
		}
	})
	t.Run("no file part", func(t *testing.T) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("other", "x")
		_ = mw.Close()
		if code, msg := ts.upload(t, &buf, mw.FormDataContentType()); code != 422 {
			t.Fatalf("upload without a file part = %d %s, want 422", code, msg)
		}
	})
	t.Run("not multipart", func(t *testing.T) {
		if code, msg := ts.upload(t, strings.NewReader("{}"), "application/json"); code != 422 {
			t.Fatalf("JSON upload = %d %s, want 422", code, msg)
		}
	})
}

// TestTraversalEveryEndpoint plants symlinks the way an earlier command
// could and tries every way out on every endpoint.
func TestTraversalEveryEndpoint(t *testing.T) {
	ts := startServer(t, nil)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("TOP SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(ts.Base, outside)
	res := ts.run(t, fmt.Sprintf("mkdir -p d && echo inside > d/f && ln -s %s planted && ln -s %s/secret secretlink && ln -s ../.. d/up && ln -s %s rel && ln -s %s/d absin && ln -s loop loop",
		outside, outside, rel, ts.Base))
	if res.ExitCode != 0 {
		t.Fatalf("planting symlinks: %+v", res)
	}
	escapes := []string{
		"..%2F" + strings.ReplaceAll(rel, "/", "%2F") + "%2Fsecret",
		"../../etc/passwd",
		"%2E%2E",
		"..",
		"d%2F..%2F..",
		"d/../../x",
		"planted",
		"planted%2Fsecret",
		"secretlink",
		"d%2Fup",
		"d/up/etc",
		"rel%2Fsecret",
		"%2Fd%2F..%2F..%2Fsecret",
		"a%00b",
	}
	for _, name := range escapes {
		for _, route := range []string{"download", "list", "exists"} {
			code, body := ts.get(t, "/"+route+"/"+name)
			var m wire.Message
			if code != 403 || json.Unmarshal(body, &m) != nil || m.Message != "Access denied" || m.Code != wire.CodePathEscape {
				t.Errorf("GET /%s/%s = %d %s, want 403 Access denied", route, name, code, body)
			}
			if strings.Contains(string(body), "TOP SECRET") {
				t.Errorf("GET /%s/%s leaked the secret", route, name)
			}
		}
	}
	// Names that stay inside still work, whatever their spelling.
	inside := map[string]string{
		"d%2Ff":             "inside\n",
		"%2Fd%2Ff":          "inside\n",
		"d%2F.%2Ff":         "inside\n",
		"x%2F..%2Fd%2Ff":    "inside\n",
		"absin%2Ff":         "inside\n",
		"d/f":               "inside\n",
		"d%2Fup%2F..%2Ff%0": "", // bad escape: 400
	}
	for name, want := range inside {
		code, body := ts.get(t, "/download/"+name)
		if want == "" {
			if code != 400 {
				t.Errorf("GET /download/%s = %d, want 400", name, code)
			}
			continue
		}
		if code != 200 || string(body) != want {
			t.Errorf("GET /download/%s = %d %q, want 200 %q", name, code, body, want)
		}
	}
	// A double-encoded name is a literal file name, not a way out.
	if code, _ := ts.get(t, "/download/%252E%252E%252Fsecret"); code != 404 {
		t.Errorf("double-encoded traversal = %d, want 404", code)
	}
	if code, body := ts.get(t, "/download/loop"); code != 404 {
		t.Errorf("symlink loop = %d %s, want 404", code, body)
	}
	if code, body := ts.get(t, "/exists/loop"); code != 200 || !strings.Contains(string(body), `"exists":false`) {
		t.Errorf("exists on a symlink loop = %d %s", code, body)
	}
}

func TestListAndExistsShapes(t *testing.T) {
	ts := startServer(t, nil)
	ts.run(t, "mkdir sub && printf 12345 > five && ln -s sub linkdir && ln -s nowhere dangling && ln -s /nonexistent absdangling")
	code, raw := ts.get(t, "/list/.")
	if code != 200 {
		t.Fatalf("list = %d %s", code, raw)
	}
	var entries []map[string]any
	if err := json.Unmarshal(raw, &entries); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		if _, ok := e["mod_time"].(float64); !ok {
			t.Errorf("%v: mod_time not a number", e)
		}
		got[e["name"].(string)] = fmt.Sprintf("%v/%v", e["type"], e["size"])
	}
	want := map[string]string{"sub": "directory/4096", "five": "file/5", "linkdir": "directory/4096", "dangling": "file/7", "absdangling": "file/12"}
	for k, v := range want {
		if got[k] != v && !(strings.HasPrefix(v, "directory") && strings.HasPrefix(got[k], "directory")) {
			t.Errorf("entry %s = %s, want %s", k, got[k], v)
		}
	}
	for path, wantBody := range map[string]string{
		"/exists/five":          `{"exists":true,"path":"five"}`,
		"/exists/sub%2Fnope":    `{"exists":false,"path":"sub/nope"}`,
		"/exists/dangling":      `{"exists":false,"path":"dangling"}`,
		"/list/five":            `{"message":"Path is not a directory","error_code":"not_found"}`,
		"/list/nope":            `{"message":"Path is not a directory","error_code":"not_found"}`,
		"/download/nope":        `{"message":"File not found","error_code":"not_found"}`,
		"/download/sub":         `{"message":"File not found: the path is a directory","error_code":"not_found"}`,
		"/download/dangling":    `{"message":"File not found","error_code":"not_found"}`,
		"/download/five%2Fbad":  `{"message":"File not found","error_code":"not_found"}`,
		"/download/absdangling": `{"message":"Access denied","error_code":"path_escape","reason":"absdangling is a symlink to /nonexistent, outside the base directory"}`, // as upstream's realpath
		"/exists/absdangling":   `{"message":"Access denied","error_code":"path_escape","reason":"absdangling is a symlink to /nonexistent, outside the base directory"}`,
	} {
		_, body := ts.get(t, path)
		if strings.TrimSpace(string(body)) != wantBody {
			t.Errorf("GET %s = %s, want %s", path, body, wantBody)
		}
	}
}

func TestDownloadRange(t *testing.T) {
	ts := startServer(t, nil)
	ts.run(t, "printf 0123456789 > digits")
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/download/digits", nil)
	req.Header.Set("Range", "bytes=3-5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || string(body) != "345" {
		t.Fatalf("range = %d %q", resp.StatusCode, body)
	}
}
func TestUploadBodyVariants(t *testing.T) {
	ts := startServer(t, nil)
	t.Run("file part after another field, with a preamble", func(t *testing.T) {
		var buf bytes.Buffer
		buf.WriteString("preamble to ignore\r\n")
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("note", "first")
		w, _ := mw.CreateFormFile("file", "second.txt")
		_, _ = w.Write([]byte("payload"))
		_ = mw.Close()
		if code, msg := ts.upload(t, &buf, mw.FormDataContentType()); code != 200 {
			t.Fatalf("upload = %d %s", code, msg)
		}
		if b, _ := os.ReadFile(filepath.Join(ts.Base, "second.txt")); string(b) != "payload" {
			t.Fatalf("second.txt = %q", b)
		}
	})
	t.Run("truncated body", func(t *testing.T) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		w, _ := mw.CreateFormFile("file", "cut.txt")
		_, _ = w.Write(bytes.Repeat([]byte("x"), 10000))
		cut := buf.Bytes() // no closing delimiter
		if code, msg := ts.upload(t, bytes.NewReader(cut), mw.FormDataContentType()); code != 400 {
			t.Fatalf("truncated upload = %d %s, want 400", code, msg)
		}
		if _, err := os.Stat(filepath.Join(ts.Base, "cut.txt")); !os.IsNotExist(err) {
			t.Fatalf("a truncated upload left cut.txt (stat err %v)", err)
		}
	})
}
