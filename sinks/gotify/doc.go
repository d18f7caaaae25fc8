// Package gotify is the Gotify sink adapter: its per-kind options
// (config.go) and its delivery (POST {base}/message with the application
// token in X-Gotify-Key, never in the URL; REQ-3).
package gotify
