package sinks

import "github.com/switchboard/notify/notifytype"

// Message is what an adapter sends: a rendered title and plain-text body
// (Render, RenderCoalesced, RenderTest) and the severity the sink maps to
// its own priority or type.
type Message struct {
	Title    string
	Body     string
	Severity notifytype.Severity
}
