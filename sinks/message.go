package sinks

import "github.com/switchboard/notify/notifytype"

// Message is what an adapter sends: a rendered title, the body as plain
// text and as Markdown (Finish, RenderCounts, RenderTest), the absolute
// board link it is about ("" for none), and the severity the sink maps to
// its own priority or type. An adapter whose server renders Markdown sends
// Markdown (Gotify); the others send Body (Apprise sends format text,
// REQ-4).
type Message struct {
	Title    string
	Body     string
	Markdown string
	Link     string
	Severity notifytype.Severity
}
