package playground

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// A browser session is one cookie: 32 random bytes, HttpOnly,
// SameSite=Strict. It is the key of the session's slot in the pool, so
// each browser session has a sandbox of its own and no other session can
// name it. Sessions are made on a page load and forgotten after
// Config.SessionTTL without a request (their slot, and a sandbox still
// open, end then), or after unusedTTL when no API call ever came: the
// page calls at once, so a session without one is a load that was not a
// browser's (a script minting cookies to fill MaxBrowserSessions). A call
// counts only once it is accepted (valid, and given the sandbox or the
// store), so refused calls do not keep a minted cookie. One client (the
// principal of the page load: without auth its address) holds at most
// perClient(MaxBrowserSessions) sessions, so that no one client fills the
// server.

// cookieName is the browser session's cookie.
const cookieName = "playground_session"

// unusedTTL is how long a session that made no API call is remembered.
const unusedTTL = time.Minute

// errTooManyBrowsers: MaxBrowserSessions are remembered.
var errTooManyBrowsers = errors.New("too many browser sessions on this server; try again later")

// errClientFull is wrapped by mint's error when the client holds its
// share of the sessions.
var errClientFull = errors.New("too many browser sessions from this client")

// perClient is one client's share of max sessions: a quarter, at least 1.
func perClient(total int) int { return max(1, total/4) }

// browser is one browser session.
type browser struct {
	// key names the session in the pool and in logs: random, and not
	// the cookie, which no log may hold.
	key    string
	client string        // who loaded the page (principal), whose share it counts against
	ended  chan struct{} // closed when the session is forgotten: its slot ends

	mu       sync.Mutex
	lastSeen time.Time
	used     bool            // an API call came
	written  map[string]bool // the files written to its sandbox, by the last call
	sandbox  string          // the sandbox written holds them
}

// browsers are the sessions the server remembers.
type browsers struct {
	max, perClient int

	mu       sync.Mutex
	m        map[string]*browser
	byClient map[string]int // sessions remembered per client
}

func newBrowsers(max int) *browsers {
	return &browsers{max: max, perClient: perClient(max), m: map[string]*browser{}, byClient: map[string]int{}}
}

// mint makes a new session of client's and sets its cookie on w.
func (bs *browsers) mint(w http.ResponseWriter, r *http.Request, client string) (string, error) {
	var raw [32 + 8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(raw[:32])
	key := "browser-" + hex.EncodeToString(raw[32:])
	bs.mu.Lock()
	if len(bs.m) >= bs.max {
		bs.mu.Unlock()
		return "", errTooManyBrowsers
	}
	if n := bs.byClient[client]; n >= bs.perClient {
		bs.mu.Unlock()
		return "", fmt.Errorf("%w: it holds %d, at most %d of the server's %d; one that makes no accepted call is forgotten after %s idle, try again then",
			errClientFull, n, bs.perClient, bs.max, unusedTTL)
	}
	bs.byClient[client]++
	bs.m[id] = &browser{key: key, client: client, ended: make(chan struct{}), lastSeen: time.Now()}
	bs.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return id, nil
}

// lookup returns the session r's cookie names, marking it seen.
func (bs *browsers) lookup(r *http.Request) (*browser, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil, false
	}
	bs.mu.Lock()
	b := bs.m[c.Value]
	bs.mu.Unlock()
	if b == nil {
		return nil, false
	}
	b.mu.Lock()
	b.lastSeen = time.Now()
	b.mu.Unlock()
	return b, true
}

// use marks the session as one the page calls from: a call of its was
// accepted.
func (b *browser) use() {
	b.mu.Lock()
	b.used = true
	b.mu.Unlock()
}

// sweep forgets the sessions unseen for longer than idle (unusedTTL for
// those that made no API call), ending their slots; it returns how many.
func (bs *browsers) sweep(idle time.Duration) int {
	now := time.Now()
	bs.mu.Lock()
	defer bs.mu.Unlock()
	n := 0
	for id, b := range bs.m {
		b.mu.Lock()
		since := now.Sub(b.lastSeen)
		old := since > idle || (!b.used && since > unusedTTL)
		b.mu.Unlock()
		if old {
			delete(bs.m, id)
			if bs.byClient[b.client]--; bs.byClient[b.client] <= 0 {
				delete(bs.byClient, b.client)
			}
			close(b.ended)
			n++
		}
	}
	return n
}

// count is how many sessions are remembered.
func (bs *browsers) count() int {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return len(bs.m)
}

// runSweeper sweeps every idle/4 (at least every second, at most every
// unusedTTL/4) until ctx is done.
func (bs *browsers) runSweeper(ctx context.Context, idle time.Duration) {
	t := time.NewTicker(min(max(idle/4, time.Second), unusedTTL/4))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			bs.sweep(idle)
		}
	}
}

// needsReset reports whether the sandbox sandboxID holds files of an
// earlier call that names does not (a file removed or renamed in the
// editor): they must go before this call's are written.
func (b *browser) needsReset(sandboxID string, names map[string]bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sandbox != sandboxID {
		return false // a fresh sandbox: /app holds nothing of ours
	}
	for n := range b.written {
		if !names[n] {
			return true
		}
	}
	return false
}

// wrote records the files the sandbox sandboxID now holds.
func (b *browser) wrote(sandboxID string, names map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sandbox, b.written = sandboxID, names
}
