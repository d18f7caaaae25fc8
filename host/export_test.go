package host

// DryRunsInFlight is how many of owner's dry runs are admitted and how many
// wait for admission.
func (s *Webhooks) DryRunsInFlight(owner string) (held, queued int) { return s.dryRuns.inFlight(owner) }

// WaitUntil is waitUntil for package host_test.
var WaitUntil = waitUntil
