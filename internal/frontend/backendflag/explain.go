package backendflag

import "github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/optionflag"

// Explain returns err with each Options field its text names replaced by
// the flag that sets it, for the backend f names (unknown fields stay as
// they are; a zero Flags explains the local backend's). The result wraps err: errors.Is and errors.As see what they
// saw before. nil stays nil.
func (f *Flags) Explain(err error) error {
	if err == nil {
		return nil
	}
	msg := f.ExplainText(err.Error())
	if msg == err.Error() {
		return err
	}
	return &explained{msg: msg, err: err}
}

// ExplainText is Explain for a message that is not an error (a
// protection's fix in a report).
func (f *Flags) ExplainText(s string) string {
	return optionflag.Text(s, f.Backend == AgentSandbox)
}

// explained is an error whose text names flags instead of Options fields.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }
