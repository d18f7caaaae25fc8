package engine

import (
	"testing"

	"github.com/switchboard/notify/actors"
)

// SinkStatus.State carries the actor's state as it is: the engine's names
// for the states must be the actors'.
func TestSinkStatesAreTheActorsStates(t *testing.T) {
	for mine, theirs := range map[string]actors.State{
		SinkIdle: actors.StateIdle, SinkDelivering: actors.StateDelivering,
		SinkHolding: actors.StateHolding, SinkStopped: actors.StateStopped,
	} {
		if mine != string(theirs) {
			t.Errorf("engine's sink state %q is the actors' %q", mine, theirs)
		}
	}
}
