package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/textproto"
)

// formBufferSize is the read buffer of an upload body. mime/multipart
// reads through a 4 KiB buffer, which caps upload throughput; this reader
// scans for the boundary over up to 1 MiB at a time.
const formBufferSize = 1 << 20

var errPartUnterminated = errors.New("multipart: body ended inside a part")

// formReader streams the parts of a multipart body (RFC 2046) in order.
type formReader struct {
	br      *bufio.Reader
	dashB   []byte // "--" + boundary: the delimiter line
	delim   []byte // "\r\n--" + boundary: what ends a part's content
	started bool
	cur     *formPart
}

func newFormReader(body io.Reader, boundary string) *formReader {
	return &formReader{
		br:    bufio.NewReaderSize(body, formBufferSize),
		dashB: []byte("--" + boundary),
		delim: []byte("\r\n--" + boundary),
	}
}

// next skips the rest of the current part and returns the next part's
// header and content; io.EOF after the closing delimiter.
func (f *formReader) next() (textproto.MIMEHeader, io.Reader, error) {
	if f.cur != nil {
		if _, err := io.Copy(io.Discard, f.cur); err != nil {
			return nil, nil, err
		}
		f.cur = nil
		// After a delimiter: "--" closes the body, else the line ends.
		b, err := f.br.Peek(2)
		if err != nil {
			return nil, nil, fmt.Errorf("multipart: after a delimiter: %w", unexpected(err))
		}
		if string(b) == "--" {
			return nil, nil, io.EOF
		}
		if err := f.skipLine(func(line []byte) bool { return len(bytes.TrimRight(line, " \t\r\n")) == 0 }); err != nil {
			return nil, nil, err
		}
	} else if !f.started {
		// Skip the preamble up to the first delimiter line.
		closing := append(append([]byte{}, f.dashB...), '-', '-')
		for {
			line, err := f.br.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			trimmed := bytes.TrimRight(line, " \t\r\n")
			if bytes.Equal(trimmed, f.dashB) {
				break
			}
			if bytes.Equal(trimmed, closing) {
				return nil, nil, io.EOF
			}
			if err != nil {
				return nil, nil, fmt.Errorf("multipart: no boundary line: %w", unexpected(err))
			}
		}
	}
	f.started = true
	hdr, err := textproto.NewReader(f.br).ReadMIMEHeader()
	if err != nil {
		return nil, nil, fmt.Errorf("multipart: part header: %w", unexpected(err))
	}
	f.cur = &formPart{f: f}
	return hdr, f.cur, nil
}

// skipLine consumes one line, which ok must accept.
func (f *formReader) skipLine(ok func([]byte) bool) error {
	line, err := f.br.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("multipart: after a delimiter: %w", unexpected(err))
	}
	if !ok(line) {
		return fmt.Errorf("multipart: unexpected text after a delimiter: %q", line)
	}
	return nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// formPart is one part's content, ending before the next delimiter.
type formPart struct {
	f    *formReader
	done bool
}

func (p *formPart) Read(b []byte) (int, error) {
	if p.done {
		return 0, io.EOF
	}
	br, delim := p.f.br, p.f.delim
	for {
		buf, _ := br.Peek(br.Buffered())
		if i := bytes.Index(buf, delim); i >= 0 {
			if i == 0 {
				_, _ = br.Discard(len(delim))
				p.done = true
				return 0, io.EOF
			}
			n := copy(b, buf[:i])
			_, _ = br.Discard(n)
			return n, nil
		}
		// Keep back a tail that could be the start of the delimiter.
		if safe := len(buf) - len(delim) + 1; safe > 0 {
			n := copy(b, buf[:safe])
			_, _ = br.Discard(n)
			return n, nil
		}
		if _, err := br.Peek(len(buf) + 1); err != nil {
			if errors.Is(err, io.EOF) {
				return 0, errPartUnterminated
			}
			return 0, err
		}
	}
}
