package contract

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/apierror"
)

// Client speaks the runtime contract to one runtime server.
//
// No answer is trusted, and each is bounded before it is held: an
// /execute answer is read up to both streams at the server's output cap,
// JSON-encoded, and room for the rest; a listing is decoded entry by
// entry within the limits of list.go; a download holds at most the bytes
// asked for (+1 to see there are more); an answer the client does not use
// is read up to drainAnswer bytes. Past a bound the call fails
// (ErrAnswerTooLarge). How long an answer may take is the caller's
// business: its ctx, and the count function the file calls take, which
// sees every byte of an answer as it is read.
type Client struct {
	http      *http.Client
	maxAnswer int64
}

// drainAnswer bounds what the client reads of an answer it does not use
// (upload's and unpack's 200, readiness), so its connection can be
// reused; a longer one is left unread and its connection closed.
const drainAnswer = 64 << 10

// ErrAnswerTooLarge is wrapped when a server's answer is over its bound.
var ErrAnswerTooLarge = errors.New("the runtime server's answer is larger than any it sends (was its socket replaced from inside the sandbox?)")

// New returns a client whose every connection comes from dial, for a
// server that caps each output stream at outputBytes.
func New(dial func(context.Context) (net.Conn, error), outputBytes int64) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx)
		},
		MaxIdleConns:        4,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}
	return &Client{http: &http.Client{Transport: tr}, maxAnswer: 2*outputBytes + 1<<20}
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// bounded returns body limited to n bytes; reading past them fails with
// an error wrapping ErrAnswerTooLarge.
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
		err = fmt.Errorf("over %d bytes: %w", b.n, ErrAnswerTooLarge)
	}
	return n, err
}

const baseURL = "http://sandbox"

// Ready reports whether the server answers GET / with 200.
func (c *Client) Ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err // the caller names the sandbox
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainAnswer))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readiness: status %s", resp.Status)
	}
	return nil
}

// get sends GET route+p (p escaped element by element) with the given
// header name/value pairs.
func (c *Client) get(ctx context.Context, route, p string, header ...string) (*http.Response, error) {
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
	return answerError(what, resp, errorBody(resp))
}

// errorBody reads the first bytes of an error answer, all Decode looks at.
func errorBody(resp *http.Response) []byte {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return body
}

// answerError is statusError for an answer whose body was read.
func answerError(what string, resp *http.Response, body []byte) error {
	msg, sentinel := apierror.Decode(resp.StatusCode, body)
	if sentinel != nil {
		return fmt.Errorf("%s: %s: %w", what, msg, sentinel)
	}
	return fmt.Errorf("%s: server answered %s: %s", what, resp.Status, msg)
}
