package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/client/apierror"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// client speaks the runtime contract (legacy agent-sandbox routes plus our
// extensions) to one runtime server over its unix socket.
//
// The sandbox's commands can replace that socket with a server of their
// own (sockdial.go), so no answer is trusted, and each is bounded before
// it is held: an /execute answer is read up to maxAnswer bytes (both
// streams at the server's output cap, JSON-encoded, and room for the
// rest); a listing is decoded entry by entry within the limits of
// listanswer.go; a download holds at most the bytes asked for (+1 to
// see there are more); an answer the client does not use is read up to
// drainAnswer bytes. Past a bound the call fails (errAnswerTooLarge).
// How long an answer may take is Sandbox.do's business (deadline.go).
type client struct {
	http      *http.Client
	maxAnswer int64
}

// drainAnswer bounds what the client reads of an answer it does not use
// (upload's and unpack's 200, readiness), so its connection can be
// reused; a longer one is left unread and its connection closed.
const drainAnswer = 64 << 10

// errAnswerTooLarge is wrapped when a server's answer is over its bound.
var errAnswerTooLarge = errors.New("the runtime server's answer is larger than any it sends (was its socket replaced from inside the sandbox?)")

// newClient returns a client for the server whose socket is at socket,
// owned by host uid uid, that caps each output stream at outputBytes.
func newClient(socket string, uid int, outputBytes int64) *client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialSandboxSocket(ctx, socket, uid)
		},
		MaxIdleConns:        4,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}
	return &client{http: &http.Client{Transport: tr}, maxAnswer: 2*outputBytes + 1<<20}
}

// bounded returns body limited to n bytes; reading past them fails with
// an error wrapping errAnswerTooLarge.
func bounded(body io.ReadCloser, n int64) io.Reader {
	return &boundedReader{r: http.MaxBytesReader(nil, body, n), n: n}
}

type boundedReader struct {
	r io.Reader
	n int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = fmt.Errorf("over %d bytes: %w", b.n, errAnswerTooLarge)
	}
	return n, err
}

func (c *client) close() { c.http.CloseIdleConnections() }

const baseURL = "http://sandbox"

// ready reports whether the server answers GET / with 200.
func (c *client) ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainAnswer))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readiness: status %s", resp.Status)
	}
	return nil
}

func (c *client) exec(ctx context.Context, r goruntime.ExecRequest) (*wire.ExecuteResponse, error) {
	body := wire.ExecuteRequest{Command: r.Command, Env: r.Env}
	if r.Timeout > 0 {
		body.TimeoutSeconds = math.Max(r.Timeout.Seconds(), 0.001)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/execute", bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError("execute", resp)
	}
	var out wire.ExecuteResponse
	if err := json.NewDecoder(bounded(resp.Body, c.maxAnswer)).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode execute response: %w", err)
	}
	return &out, nil
}

func (c *client) upload(ctx context.Context, name string, r io.Reader) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", name)
		if err == nil {
			_, err = io.Copy(part, r)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/upload", pr)
	if err != nil {
		pr.Close()
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError("upload "+name, resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainAnswer))
	return nil
}

// unpack posts a tar archive to /unpack. A server without the route
// answers 404 without an error code: errors.ErrUnsupported.
func (c *client) unpack(ctx context.Context, r io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/unpack", r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var m wire.Message
		if json.Unmarshal(body, &m) != nil || m.Code == "" {
			return fmt.Errorf("unpack: the runtime server has no /unpack: %w", errors.ErrUnsupported)
		}
		return fmt.Errorf("unpack: %s", m.Message)
	}
	if resp.StatusCode != http.StatusOK {
		return statusError("unpack", resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainAnswer))
	return nil
}

// download returns the whole of p, at most goruntime.MaxReadFileBytes:
// it holds what the answer's Content-Length announces (refusing more
// than the cap before reading) or, without one, what arrives up to the
// cap. Bytes read count toward file's deadline.
func (c *client) download(ctx context.Context, p string, file *callLimit) ([]byte, error) {
	resp, err := c.get(ctx, "/download/", p)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError("read "+p, resp)
	}
	tooLarge := func() error {
		return fmt.Errorf("read %s: the file is over %d MiB (goruntime.MaxReadFileBytes); read it in parts with Session.ReadFileRange: %w",
			p, goruntime.MaxReadFileBytes>>20, goruntime.ErrTooLarge)
	}
	if resp.ContentLength > goruntime.MaxReadFileBytes {
		return nil, tooLarge()
	}
	body := file.count(resp.Body)
	if resp.ContentLength >= 0 {
		// The transport ends the body at Content-Length: hold exactly that.
		data := make([]byte, resp.ContentLength)
		if _, err := io.ReadFull(body, data); err != nil {
			return nil, fmt.Errorf("read %s: the answer ended before its %d bytes: %w", p, resp.ContentLength, err)
		}
		return data, nil
	}
	data, err := io.ReadAll(io.LimitReader(body, goruntime.MaxReadFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > goruntime.MaxReadFileBytes {
		return nil, tooLarge()
	}
	return data, nil
}

// downloadRange fetches at most n bytes of p from byte off with an HTTP
// Range request (the server answers with http.ServeContent): 206 carries
// the bytes, 416 means off is at or past the end (no bytes). It holds at
// most n bytes whatever the answer's length. Bytes read count toward
// file's deadline.
func (c *client) downloadRange(ctx context.Context, p string, off int64, n int, file *callLimit) ([]byte, error) {
	resp, err := c.get(ctx, "/download/", p, "Range", fmt.Sprintf("bytes=%d-%d", off, off+int64(n)-1))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body := file.count(resp.Body)
	switch resp.StatusCode {
	case http.StatusPartialContent:
		return io.ReadAll(io.LimitReader(body, int64(n)))
	case http.StatusRequestedRangeNotSatisfiable:
		return nil, nil
	case http.StatusOK:
		// A server that ignores Range sends the whole file: skip to off.
		if _, err := io.CopyN(io.Discard, body, off); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, nil
			}
			return nil, fmt.Errorf("read %s: skip to byte %d: %w", p, off, err)
		}
		return io.ReadAll(io.LimitReader(body, int64(n)))
	default:
		return nil, statusError(fmt.Sprintf("read %s (bytes %d-%d)", p, off, off+int64(n)), resp)
	}
}

// list returns the entries of directory p (decodeList's limits). Bytes
// read count toward file's deadline.
func (c *client) list(ctx context.Context, p string, file *callLimit) ([]goruntime.FileInfo, error) {
	resp, err := c.get(ctx, "/list/", p)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError("list "+p, resp)
	}
	out, err := decodeList(file.count(bounded(resp.Body, maxListAnswer)))
	if err != nil {
		return nil, fmt.Errorf("decode list %s: %w", p, err)
	}
	return out, nil
}

// get sends GET route+p (p escaped element by element) with the given
// header name/value pairs.
func (c *client) get(ctx context.Context, route, p string, header ...string) (*http.Response, error) {
	u := &url.URL{Scheme: "http", Host: "sandbox", Path: route + p, RawPath: route + pathEscape(p)}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return c.http.Do(req)
}

// pathEscape escapes each element of a slash-separated path.
func pathEscape(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// statusError turns a non-200 answer into an error wrapping the matching
// goruntime sentinel (apierror.Decode).
func statusError(what string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg, sentinel := apierror.Decode(resp.StatusCode, body)
	if sentinel != nil {
		return fmt.Errorf("%s: %s: %w", what, msg, sentinel)
	}
	return fmt.Errorf("%s: server answered %s: %s", what, resp.Status, msg)
}
