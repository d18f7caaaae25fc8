// Command switchboard-notify is the Switchboard Notify server and its admin
// helpers. It reads its configuration from the environment (see README.md).
// Every command answers --help with what it does and an example.
//
//	switchboard-notify [serve]                      run the server (the default)
//	switchboard-notify migrate                      create the database if missing and apply migrations
//	switchboard-notify demo                         ensure the demo human; print a login link and an operator token
//	switchboard-notify status                       print the per-sink actor table
//	switchboard-notify grant-operator <email>       give a human the operator role (/ops, /metrics)
//	switchboard-notify humans                       list humans and their teams
//	switchboard-notify teams                        list teams and their members
//	switchboard-notify create-human <email> <name>  create a human
//	switchboard-notify create-team <name>           create a team
//	switchboard-notify add-member <team> <email> <role>  add a human to a team as owner, admin or member
//	switchboard-notify mint-token <email>           print a new operator API token for a human
//	switchboard-notify login-link <email>           print a one-time web UI login link for a human
//	switchboard-notify version                      print the version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/switchboard/notify/host/rulesandbox"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = ""

// command is one command of the binary.
type command struct {
	name string
	// args is the argument synopsis ("<email> <name>"); nargs how many the
	// command takes (-1: at least one).
	args  string
	nargs int
	// summary is the one line of the usage; help the --help text, which
	// ends with an example.
	summary, help string
	// run does the command; cfg is loaded from the environment first.
	run func(ctx context.Context, cfg config, log *slog.Logger, args []string, stdout io.Writer) error
}

// commands are the binary's commands, in the order the usage lists them.
var commands = []command{
	{name: "serve", summary: "run the server (default)", help: `Creates the database if missing, applies the migrations, delivers notifications and
serves the web UI, /api/v1, /mcp, /ops/actors, /metrics and GET /healthz on
SWITCHBOARD_LISTEN. Stops gracefully on SIGINT or SIGTERM.

Example:
  DATABASE_URL=postgres://localhost/switchboard SWITCHBOARD_SECRET_KEY=$(openssl rand -base64 32) \
    switchboard-notify serve`,
		run: func(ctx context.Context, cfg config, log *slog.Logger, _ []string, stdout io.Writer) error {
			return runServe(ctx, cfg, log, stdout)
		}},
	{name: "migrate", summary: "create the database if missing and apply the migrations", help: `Creates the database DATABASE_URL names if it does not exist, then applies every
migration not yet applied. Safe to run while other instances serve.

Example:
  DATABASE_URL=postgres://localhost/switchboard switchboard-notify migrate`,
		run: func(ctx context.Context, cfg config, log *slog.Logger, _ []string, stdout io.Writer) error {
			return runMigrate(ctx, cfg, log, stdout)
		}},
	{name: "demo", summary: "ensure the demo human, print a one-time login link and an operator API token", help: `Creates the demo human (demo@switchboard.local) if missing and prints a new one-time
login link for the web UI and a new operator API token. Both are shown this once.

Example:
  SWITCHBOARD_BASE_URL=http://localhost:8080 switchboard-notify demo`,
		run: func(ctx context.Context, cfg config, _ *slog.Logger, _ []string, stdout io.Writer) error {
			return runDemo(ctx, cfg, stdout)
		}},
	{name: "status", summary: "print the per-sink actor table of a running server", help: `Asks the running server at SWITCHBOARD_BASE_URL for its sink actors (GET /ops/actors)
with the operator token in SWITCHBOARD_API_TOKEN and prints them as a table.

Example:
  SWITCHBOARD_API_TOKEN=sbo_... switchboard-notify status`,
		run: func(ctx context.Context, cfg config, _ *slog.Logger, _ []string, stdout io.Writer) error {
			return runStatus(ctx, cfg, stdout)
		}},
	{name: "grant-operator", args: "<email>", nargs: 1, summary: "give a human the operator role (D26)", help: `Gives the human with <email> the operator role: the instance-wide /ops view, /metrics
and every sink in status. Other humans see only their own scopes' sinks there.

Example:
  switchboard-notify grant-operator olga@example.net`,
		run: func(ctx context.Context, cfg config, _ *slog.Logger, args []string, stdout io.Writer) error {
			return runGrantOperator(ctx, cfg, args[0], stdout)
		}},
	{name: "humans", summary: "list humans with their teams and roles", help: `Lists every human: id, email, name, and the teams they belong to with their role.

Example:
  switchboard-notify humans`,
		run: runHumans},
	{name: "teams", summary: "list teams with their members and roles", help: `Lists every team: id, name, and each member's email and role (owner, admin, member).

Example:
  switchboard-notify teams`,
		run: runTeams},
	{name: "create-human", args: "<email> <name>", nargs: -1, summary: "create a human", help: `Creates a human with an email address and a name (the rest of the arguments). Print a
login link for them afterwards with login-link.

Example:
  switchboard-notify create-human ada@example.net Ada Lovelace`,
		run: runCreateHuman},
	{name: "create-team", args: "<name>", nargs: -1, summary: "create a team", help: `Creates a team named by the arguments. Add members with add-member.

Example:
  switchboard-notify create-team Night Shift`,
		run: runCreateTeam},
	{name: "add-member", args: "<team> <email> <role>", nargs: 3, summary: "add a human to a team as owner, admin or member", help: `Makes the human with <email> a member of <team> (its name or id) with <role>: owner or
admin (configure the team's sinks, subscriptions and queues) or member (see them and
enqueue todos). A human already in the team gets the new role.

Example:
  switchboard-notify add-member "Night Shift" ada@example.net admin`,
		run: runAddMember},
	{name: "mint-token", args: "<email>", nargs: 1, summary: "print a new operator API token for a human", help: `Mints an operator API bearer token (sbo_...) for the human with <email> and prints
it, this once: only its hash is stored. Send it as "Authorization: Bearer <token>" to
/api/v1, or set it as SWITCHBOARD_API_TOKEN for the status command.

Example:
  switchboard-notify mint-token ada@example.net`,
		run: runMintToken},
	{name: "login-link", args: "<email>", nargs: 1, summary: "print a one-time web UI login link for a human", help: `Prints a one-time login link for the human with <email>: it signs them in to the web UI
once, within 15 minutes.

Example:
  SWITCHBOARD_BASE_URL=https://notify.example.net switchboard-notify login-link ada@example.net`,
		run: runLoginLink},
	{name: "version", summary: "print the version", help: `Prints the version stamped at build time.

Example:
  switchboard-notify version`},
}

// usage is the binary's usage, listing every command.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: switchboard-notify [command] [arguments]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-40s %s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	b.WriteString("\nRun switchboard-notify <command> --help for a command's details and an example.\n" +
		"Configuration is read from the environment; see README.md.\n")
	return b.String()
}

// errUsage is a command line the binary does not understand.
var errUsage = errors.New("unknown command")

func main() {
	// A rule worker (host/rulesandbox) is this binary re-executed with a
	// hidden argument: it becomes one here, before anything else runs (the
	// package's init has already done so; this says it where main starts).
	rulesandbox.MaybeRunWorker()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "switchboard-notify:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// run executes one command. ctx is cancelled on SIGINT or SIGTERM.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	name := "serve"
	if len(args) > 0 {
		name, args = args[0], args[1:]
	}
	switch {
	case name == "help" || isHelp(name):
		if len(args) == 0 {
			fmt.Fprint(stdout, usage())
			return nil
		}
		name, args = args[0], []string{"--help"}
	case name == "-version" || name == "--version":
		name = "version"
	}
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		fmt.Fprint(stderr, usage())
		return fmt.Errorf("%w %q", errUsage, name)
	}
	cmd := commands[i]
	if slices.ContainsFunc(args, isHelp) {
		fmt.Fprintf(stdout, "usage: switchboard-notify %s\n\n%s\n", strings.TrimSpace(cmd.name+" "+cmd.args), cmd.help)
		return nil
	}
	switch {
	case cmd.nargs >= 0 && len(args) != cmd.nargs, cmd.nargs < 0 && len(args) == 0:
		fmt.Fprintf(stderr, "usage: switchboard-notify %s\n\n%s\n", strings.TrimSpace(cmd.name+" "+cmd.args), cmd.help)
		if cmd.args == "" {
			return fmt.Errorf("%w: %s takes no arguments", errUsage, cmd.name)
		}
		return fmt.Errorf("%w: %s takes %s", errUsage, cmd.name, cmd.args)
	}
	if cmd.name == "version" {
		fmt.Fprintln(stdout, "switchboard-notify", versionString())
		return nil
	}

	cfg, err := loadConfig(lookup)
	if err != nil {
		return err
	}
	return cmd.run(ctx, cfg, newLogger(cfg, stderr), args, stdout)
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
