package notifytype

// ErrorClass is the one word a failed delivery attempt is recorded, logged
// and counted under (D11). The same value is a record column, a log field and
// a metric label.
type ErrorClass string

const (
	ClassNone     ErrorClass = ""
	ClassNetwork  ErrorClass = "network"
	ClassTimeout  ErrorClass = "timeout"
	ClassTLS      ErrorClass = "tls"
	ClassAuth     ErrorClass = "auth"     // 401, 403
	ClassRejected ErrorClass = "rejected" // other 4xx
	ClassServer   ErrorClass = "server"   // 5xx
	ClassRedirect ErrorClass = "redirect" // 3xx, never followed
	ClassPartial  ErrorClass = "partial"  // Apprise 424
	ClassConfig   ErrorClass = "config"   // Apprise 204
	ClassBlocked  ErrorClass = "blocked"  // SSRF guard, scheme, HTTP without the opt-in
	// ClassAbandoned is an attempt whose outcome is unknown: its instance
	// died mid-send or its adapter panicked (D25). It may have been sent.
	ClassAbandoned ErrorClass = "abandoned"
)

// ErrorClasses lists every failure class.
var ErrorClasses = []ErrorClass{
	ClassNetwork, ClassTimeout, ClassTLS, ClassAuth, ClassRejected, ClassServer,
	ClassRedirect, ClassPartial, ClassConfig, ClassBlocked, ClassAbandoned,
}

// Final reports whether a failure of this class ends the row at once, with
// no retry (D10): a config error or a destination the guard refuses.
func (c ErrorClass) Final() bool { return c == ClassConfig || c == ClassBlocked }
