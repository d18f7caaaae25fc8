// Command switchboard-notify is the Switchboard Notify server and its admin
// helpers. It reads its configuration from the environment (see README.md).
//
//	switchboard-notify [serve]   run the server (the default)
//	switchboard-notify migrate   create the database if missing and apply migrations
//	switchboard-notify demo      ensure the demo human; print a login link and an operator token
//	switchboard-notify status    print the per-sink actor table
//	switchboard-notify version   print the version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = ""

const usage = `usage: switchboard-notify [command]

commands:
  serve     run the server (default)
  migrate   create the database if missing and apply the migrations
  demo      ensure the demo human, print a one-time login link and an operator API token
  status    print the per-sink actor table
  grant-operator <email>
            give the human with this email the operator role: the instance-wide
            /ops view, /metrics and every sink in status
  version   print the version

Configuration is read from the environment; see README.md.
`

// errUsage is a command line the binary does not understand.
var errUsage = errors.New("unknown command")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "switchboard-notify:", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run executes one command. ctx is cancelled on SIGINT or SIGTERM.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	var operand string
	switch {
	case cmd == "grant-operator" && len(args) != 2:
		return fmt.Errorf("%w: grant-operator takes one argument, the human's email", errUsage)
	case cmd == "grant-operator":
		operand = args[1]
	case len(args) > 1:
		return fmt.Errorf("%w: %s takes no arguments", errUsage, cmd)
	}
	switch cmd {
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "switchboard-notify", versionString())
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "serve", "migrate", "demo", "status", "grant-operator":
	default:
		return fmt.Errorf("%w %q", errUsage, cmd)
	}

	cfg, err := loadConfig(lookup)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)

	switch cmd {
	case "migrate":
		return runMigrate(ctx, cfg, log, stdout)
	case "demo":
		return runDemo(ctx, cfg, stdout)
	case "status":
		return runStatus(ctx, cfg, stdout)
	case "grant-operator":
		return runGrantOperator(ctx, cfg, operand, stdout)
	default:
		return runServe(ctx, cfg, log, stdout)
	}
}

// versionString is the version stamped at build time, else the module
// version Go recorded, else "dev".
func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
