package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// ProcessKey is the client key of the process-wide sandbox: a front end
// with one client per process (mcp-server over stdio) uses it, and only
// its sandbox attaches to Config.Claim and stays with Config.Persistent.
const ProcessKey = ""

// Config configures a Pool.
type Config struct {
	// Backend provisions the sandboxes. Required.
	Backend goruntime.Backend
	// Session is the options of every session opened.
	Session goruntime.Options
	// OpenTimeout bounds opening (or attaching to) one sandbox. Required.
	OpenTimeout time.Duration
	// Claim is a running sandbox's ID: ProcessKey's client attaches to it
	// instead of opening one.
	Claim string
	// Persistent leaves ProcessKey's sandbox running (Disconnect) when it
	// ends, to be attached again with Claim.
	Persistent bool
	// MaxSandboxes bounds the sandboxes open at once, the pool's and
	// Others'; 0: no bound.
	MaxSandboxes int
	// Others, when not nil, counts the sandboxes outside the pool that
	// MaxSandboxes bounds too (a front end's durable handles). It is
	// asked before each open; its error refuses the open.
	Others func(context.Context) (int, error)
	// MaxPerPrincipal bounds the sandboxes one principal holds at once:
	// the pool's sandboxes its calls opened and OthersOf's; 0: no
	// bound. A principal past it is refused; the others keep theirs
	// (limits.go).
	MaxPerPrincipal int
	// OthersOf, when not nil, counts a principal's sandboxes outside the
	// pool that MaxPerPrincipal bounds too (its durable handles). It is
	// asked before each open; its error refuses the open.
	OthersOf func(ctx context.Context, principal string) (int, error)
	// Logger receives the pool's logs; nil discards them.
	Logger *slog.Logger
	// Opened, when not nil, is told how long each open took and its error
	// (a front end's metrics).
	Opened func(time.Duration, error)
}

// Pool holds one slot per client of a front end (an MCP session; one for
// the whole process over stdio), keyed by a string the front end picks. A
// slot's sandbox is opened on the client's first call that needs one and
// closed when the client ends, when it has been idle too long (Reap), or
// when the pool closes.
type Pool struct {
	backend goruntime.Backend
	cfg     Config
	log     *slog.Logger

	mu          sync.Mutex
	slots       map[string]*slot
	open        int                          // the slots' sandboxes open or opening
	making      int                          // sandboxes made outside the pool now (Reserve)
	byPrincipal map[string]use               // open and making, by principal (limits.go)
	closed      bool                         // Close was called
	opening     map[*slot]goruntime.Progress // the latest progress of opens in flight
}

// slot is the state of one client. Holding its turn serializes the
// session's tool calls and guards sess, reaped and gone.
type slot struct {
	key  string
	turn chan struct{} // capacity 1: a call holds the turn by sending into it

	// guarded by turn
	sess   *goruntime.Session
	owner  string        // the principal sess counts against (whose call opened it)
	reaped time.Duration // idle time of a sandbox the reaper closed; reported once on the next call
	gone   bool          // the client ended or the pool closed: no more calls

	// guarded by pool.mu
	lastUsed time.Time
}

// New returns an empty pool.
func New(cfg Config) *Pool {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pool{backend: cfg.Backend, cfg: cfg, log: log, slots: map[string]*slot{}, byPrincipal: map[string]use{},
		opening: map[*slot]goruntime.Progress{}}
}

// acquire takes the turn of the slot for key, creating the slot if needed.
// watch, when non-nil and the slot is new, is called once and must return a
// channel closed when the client ends. It waits for calls ahead of it
// until ctx is done.
func (p *Pool) acquire(ctx context.Context, key string, watch func() <-chan struct{}) (*slot, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("shutting down: %w", goruntime.ErrClosed)
	}
	s := p.slots[key]
	if s == nil {
		s = &slot{key: key, turn: make(chan struct{}, 1), lastUsed: time.Now()}
		p.slots[key] = s
		if watch != nil {
			done := watch()
			go func() {
				<-done
				p.drop(key, s)
			}()
		}
	}
	p.mu.Unlock()

	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the previous call in this session: %w", context.Cause(ctx))
	}
	if s.gone {
		<-s.turn
		return nil, fmt.Errorf("session ended: %w", goruntime.ErrClosed)
	}
	return s, nil
}

// release gives back the turn taken by acquire.
func (p *Pool) release(s *slot) {
	p.mu.Lock()
	s.lastUsed = time.Now()
	p.mu.Unlock()
	<-s.turn
}

// session returns the slot's sandbox session, opening it (or attaching to
// the claimed sandbox) on first use, counted against principal's share
// until it closes. The caller holds the slot's turn.
func (p *Pool) session(ctx context.Context, s *slot, principal string) (*goruntime.Session, error) {
	if s.sess != nil {
		return s.sess, nil
	}
	out, err := p.outside(ctx, principal)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if err := p.roomLocked(principal, out); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	p.open++
	p.addLocked(principal, use{sessions: 1})
	p.mu.Unlock()

	octx, cancel := context.WithTimeout(ctx, p.cfg.OpenTimeout)
	defer cancel()
	octx = goruntime.WithProgress(octx, p.progressFunc(ctx, s))
	defer func() {
		p.mu.Lock()
		delete(p.opening, s)
		p.mu.Unlock()
	}()
	start := time.Now()
	var sess *goruntime.Session
	if s.key == ProcessKey && p.cfg.Claim != "" {
		sess, err = goruntime.Attach(octx, p.backend, p.cfg.Claim, p.cfg.Session)
	} else {
		sess, err = goruntime.Open(octx, p.backend, p.cfg.Session)
	}
	if p.cfg.Opened != nil {
		p.cfg.Opened(time.Since(start), err)
	}
	if err != nil {
		p.mu.Lock()
		p.open--
		p.addLocked(principal, use{sessions: -1})
		p.mu.Unlock()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("%w (gave up after the open timeout, %s)", err, p.cfg.OpenTimeout)
		}
		return nil, err
	}
	p.log.Info("sandbox ready", "backend", p.backend.Name(), "sandbox", sess.ID(),
		"client", s.key, "open_ms", time.Since(start).Milliseconds())
	s.sess, s.owner = sess, principal
	return sess, nil
}

// progressLogEvery is how often an open in progress is logged when its
// step does not change.
const progressLogEvery = 10 * time.Second

// progressFunc is the progress function of the open of s's sandbox: it
// logs the backend's reports (every new step, else every
// progressLogEvery), records the latest for calls waiting on s
// (openingMessage), and passes each on to ctx's own progress function
// (a front end's progress notifications for the call).
func (p *Pool) progressFunc(ctx context.Context, s *slot) func(goruntime.Progress) {
	var logged goruntime.Progress
	var loggedAt time.Time
	return func(pr goruntime.Progress) {
		if pr.Step != logged.Step || pr.Message != logged.Message || time.Since(loggedAt) >= progressLogEvery {
			p.log.Info("opening sandbox", "backend", p.backend.Name(), "progress", pr.String())
			logged, loggedAt = pr, time.Now()
		}
		p.mu.Lock()
		p.opening[s] = pr
		p.mu.Unlock()
		goruntime.ReportProgress(ctx, pr)
	}
}

// openingMessage returns the latest progress of the open in flight for
// the slot of key, or "" when none runs.
func (p *Pool) openingMessage(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.slots[key]; s != nil {
		if pr, ok := p.opening[s]; ok {
			return pr.String()
		}
	}
	return ""
}

// closeSession ends the slot's sandbox: Disconnect for the process-wide
// sandbox with Config.Persistent, Close otherwise. The caller holds the turn.
func (p *Pool) closeSession(ctx context.Context, s *slot, why string) {
	if s.sess == nil {
		return
	}
	sess := s.sess
	s.sess = nil
	p.mu.Lock()
	p.open--
	p.addLocked(s.owner, use{sessions: -1})
	p.mu.Unlock()
	if s.key == ProcessKey && p.cfg.Persistent {
		if err := sess.Disconnect(ctx); err != nil {
			p.log.Error("disconnect sandbox", "sandbox", sess.ID(), "err", err)
			return
		}
		p.log.Info("sandbox kept running (persistent); attach to it again by its ID", "sandbox", sess.ID(), "claim", sess.ID())
		return
	}
	if err := sess.Close(ctx); err != nil {
		p.log.Error("close sandbox", "sandbox", sess.ID(), "why", why, "err", err)
		return
	}
	p.log.Info("sandbox closed", "sandbox", sess.ID(), "client", s.key, "why", why)
}

// drop forgets the slot of a client that ended and closes its
// sandbox once the call in flight (if any) returns.
// The slot stays in the pool until its sandbox is closed, so that Close
// waits for it.
func (p *Pool) drop(key string, s *slot) {
	s.turn <- struct{}{}
	defer func() { <-s.turn }()
	if !s.gone {
		s.gone = true
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.OpenTimeout)
		defer cancel()
		p.closeSession(ctx, s, "client ended")
	}
	p.mu.Lock()
	if p.slots[key] == s {
		delete(p.slots, key)
	}
	p.mu.Unlock()
}

// Reap closes the sandboxes of slots idle for longer than ttl whose turn is
// free, and returns how many it closed. Their clients stay: the next
// call opens a fresh sandbox and is told how long the old one sat idle.
func (p *Pool) Reap(ctx context.Context, ttl time.Duration) int {
	now := time.Now()
	p.mu.Lock()
	var idle []*slot
	for _, s := range p.slots {
		if now.Sub(s.lastUsed) > ttl {
			idle = append(idle, s)
		}
	}
	p.mu.Unlock()
	n := 0
	for _, s := range idle {
		select {
		case s.turn <- struct{}{}:
		default:
			continue // a call is running or waiting
		}
		p.mu.Lock()
		idleFor := now.Sub(s.lastUsed)
		stillIdle := idleFor > ttl
		p.mu.Unlock()
		if stillIdle && s.sess != nil && !s.gone {
			p.closeSession(ctx, s, "idle for "+idleFor.Round(time.Second).String())
			s.reaped = idleFor
			n++
		}
		<-s.turn
	}
	return n
}

// RunReaper calls Reap every ttl/4 (at least every second, at most every
// minute) until ctx is done.
func (p *Pool) RunReaper(ctx context.Context, ttl time.Duration) {
	every := min(max(ttl/4, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.Reap(ctx, ttl)
		}
	}
}

// Close ends every sandbox, waiting for calls in flight until ctx is done;
// later calls fail with an error wrapping goruntime.ErrClosed.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	slots := make([]*slot, 0, len(p.slots))
	for _, s := range p.slots {
		slots = append(slots, s)
	}
	p.mu.Unlock()
	var errs []error
	for _, s := range slots {
		select {
		case s.turn <- struct{}{}:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("close sandbox of client %q: %w", s.key, ctx.Err()))
			continue
		}
		if !s.gone {
			s.gone = true
			p.closeSession(ctx, s, "shutting down")
		}
		<-s.turn
	}
	return errors.Join(errs...)
}

// Open reports how many of the clients' sandboxes are open (or opening);
// sandboxes made through Reserve are not among them.
func (p *Pool) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}
