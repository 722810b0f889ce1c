package contract

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/apierror"
)

// The file calls take count, which wraps each body the call reads (an
// upload's content, an answer) so the caller sees the bytes move, e.g.
// for a deadline that grows with them; nil counts nothing.

func counted(count func(io.Reader) io.Reader, r io.Reader) io.Reader {
	if count == nil {
		return r
	}
	return count(r)
}

// Upload sends r as the file name (a plain name: goruntime.CheckName)
// with POST /upload.
func (c *Client) Upload(ctx context.Context, name string, r io.Reader, count func(io.Reader) io.Reader) error {
	r = counted(count, r)
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

// Unpack posts a tar archive to /unpack. A server without the route
// answers 404 without an error code: errors.ErrUnsupported.
func (c *Client) Unpack(ctx context.Context, r io.Reader, count func(io.Reader) io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/unpack", counted(count, r))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body := errorBody(resp)
		if apierror.NoRoute(resp.StatusCode, body) {
			return fmt.Errorf("unpack: the runtime server has no /unpack: %w", errors.ErrUnsupported)
		}
		return answerError("unpack", resp, body)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainAnswer))
	return nil
}

// Download returns the whole of p, at most goruntime.MaxReadFileBytes:
// it holds what the answer's Content-Length announces (refusing more
// than the cap before reading) or, without one, what arrives up to the
// cap.
func (c *Client) Download(ctx context.Context, p string, count func(io.Reader) io.Reader) ([]byte, error) {
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
	body := counted(count, resp.Body)
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
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if len(data) > goruntime.MaxReadFileBytes {
		return nil, tooLarge()
	}
	return data, nil
}

// DownloadRange fetches at most n bytes of p from byte off with an HTTP
// Range request (the server answers with http.ServeContent): 206 carries
// the bytes, 416 means off is at or past the end (no bytes). It holds at
// most n bytes whatever the answer's length.
func (c *Client) DownloadRange(ctx context.Context, p string, off int64, n int, count func(io.Reader) io.Reader) ([]byte, error) {
	resp, err := c.get(ctx, "/download/", p, "Range", fmt.Sprintf("bytes=%d-%d", off, off+int64(n)-1))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body := counted(count, resp.Body)
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

// List returns the entries of directory p (decodeList's limits).
func (c *Client) List(ctx context.Context, p string, count func(io.Reader) io.Reader) ([]goruntime.FileInfo, error) {
	resp, err := c.get(ctx, "/list/", p)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError("list "+p, resp)
	}
	out, err := decodeList(counted(count, bounded(resp.Body, maxListAnswer)))
	if err != nil {
		return nil, fmt.Errorf("decode list %s: %w", p, err)
	}
	return out, nil
}

// TakeSnapshot writes the runtime server's snapshot of the sandbox's
// files (GET wire.SnapshotPath: one tar) to w as it arrives. The tar is
// whole only when the call returns nil: the server reports what went
// wrong once it had begun in the answer's trailers, and a stream cut
// short has none. Errors wrap goruntime.ErrSandboxBusy when something
// runs (or ran meanwhile) in the sandbox, errors.ErrUnsupported when
// the server has no such route, and w's own errors as they are.
func (c *Client) TakeSnapshot(ctx context.Context, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+wire.SnapshotPath, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body := errorBody(resp)
		if apierror.NoRoute(resp.StatusCode, body) {
			return fmt.Errorf("snapshot: the runtime server has no %s: %w", wire.SnapshotPath, errors.ErrUnsupported)
		}
		return answerError("snapshot", resp, body)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	switch status := resp.Trailer.Get(wire.SnapshotStatusTrailer); status {
	case wire.SnapshotStatusOK:
		return nil
	case "":
		return errors.New("snapshot: the runtime server's answer ended without its status (cut short?)")
	default:
		msg := clip.String(resp.Trailer.Get(wire.SnapshotErrorTrailer), 1000)
		if wire.ErrorCode(status) == wire.CodeBusy {
			return fmt.Errorf("snapshot: %s: %w", msg, goruntime.ErrSandboxBusy)
		}
		return fmt.Errorf("snapshot: the runtime server failed (%s): %s", clip.String(status, 40), msg)
	}
}

// PutSnapshot writes the tar r (as TakeSnapshot got one) into the
// sandbox in one request (POST wire.SnapshotPath): mode
// wire.SnapshotModeRestore empties the sandbox's files first (but its
// caches), wire.SnapshotModeAdd writes over what is there. Errors are
// the server's answer's, decoded (goruntime.ErrSandboxBusy,
// goruntime.ErrDiskFull, ...), and errors.ErrUnsupported when the server
// has no such route.
func (c *Client) PutSnapshot(ctx context.Context, r io.Reader, mode string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+wire.SnapshotPath+"?mode="+url.QueryEscape(mode), r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body := errorBody(resp)
		if apierror.NoRoute(resp.StatusCode, body) {
			return fmt.Errorf("write a snapshot: the runtime server has no %s: %w", wire.SnapshotPath, errors.ErrUnsupported)
		}
		return answerError("write a snapshot", resp, body)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainAnswer))
	return nil
}
