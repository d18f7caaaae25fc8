package main

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
)

// newLogger returns the process logger: tint (coloured, short times) when
// w is a terminal or the text format is asked for, JSON otherwise. It also
// becomes slog's default, so libraries that log through slog agree.
func newLogger(cfg config, w io.Writer) *slog.Logger {
	terminal := isTerminal(w)
	var h slog.Handler
	switch {
	case cfg.LogFormat == LogFormatText || (cfg.LogFormat == LogFormatAuto && terminal):
		h = tint.NewHandler(w, &tint.Options{Level: cfg.LogLevel, TimeFormat: time.TimeOnly, NoColor: !terminal})
	default:
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: cfg.LogLevel})
	}
	log := slog.New(h)
	slog.SetDefault(log)
	return log
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
