package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/config"
	"github.com/kaimon/kaimon/internal/fleet"
	"github.com/kaimon/kaimon/internal/verbs"
	"github.com/kaimon/kaimon/internal/version"
)

// hostFlag picks the host a command drives. KAIMON_HOST is read by hand,
// not as the flag's EnvVars: only a --host given on the line contradicts an
// id qualified with another host, while KAIMON_HOST is a default that such
// an id overrides. Made anew for each command tree, as jsonFlag is.
func hostFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "host", Usage: "the host to drive, `NAME|URL`: a name of kaimon host ls, local (this machine, the default) " +
		"or ssh://[USER@]HOST[:PORT]; else KAIMON_HOST", DefaultText: verbs.HostLocal}
}

// fleetKey holds the run's fleet in the app's Metadata: one per run, so
// that a host's first exchange happens once and its connections close at
// the end (closeFleet).
const fleetKey = "kaimon.fleet"

// fleetOf is the run's fleet: the configured hosts, --host or KAIMON_HOST as
// the default, and this machine's client as the command line set it up.
func fleetOf(c *cli.Context) (*fleet.Fleet, error) {
	if f, ok := c.App.Metadata[fleetKey].(*fleet.Fleet); ok {
		return f, nil
	}
	paths, err := config.Resolve()
	if err != nil {
		return nil, err
	}
	host, pinned := c.String("host"), c.IsSet("host")
	if !pinned {
		host = os.Getenv("KAIMON_HOST")
	}
	f, err := fleet.New(paths, host, pinned)
	if err != nil {
		if !pinned && host != "" {
			return nil, fmt.Errorf("KAIMON_HOST: %w", err)
		}
		return nil, fmt.Errorf("--host: %w", err)
	}
	if f.Local, err = localClient(c); err != nil {
		return nil, err
	}
	f.Warn = c.App.ErrWriter
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	c.App.Metadata[fleetKey] = f
	return f, nil
}

// shownID is id as output shows it: qualified with the host the run drives
// (fleet.Shown), so that a hint line can be pasted back as it is.
func shownID(c *cli.Context, id string) string {
	if f, ok := c.App.Metadata[fleetKey].(*fleet.Fleet); ok {
		return f.Shown(id)
	}
	return id
}

// remoteHost says which host a command about id drives, when it is not
// this machine: what a path on the command line must be a path of.
func remoteHost(c *cli.Context, id string) (string, bool) {
	if f, _ := c.App.Metadata[factoryKey].(factory); f.service != nil {
		return "", false // a test's service: this machine's
	}
	f, err := fleetOf(c)
	if err != nil {
		return "", false // the call that follows reports it
	}
	host, _, err := f.Route(id)
	if err != nil || fleet.IsLocal(host) {
		return "", false
	}
	return host, true
}

// closeFleet ends the ssh children the run's remote clients kept.
func closeFleet(c *cli.Context) error {
	if f, ok := c.App.Metadata[fleetKey].(*fleet.Fleet); ok {
		f.CloseIdle()
	}
	return nil
}

// hostCheckWait bounds `host ls --check`: each host's first exchange
// gives up on a dead link within 8 s by itself; this is the backstop.
const hostCheckWait = 20 * time.Second

// hostEntry is one row of `kaimon host ls --json`.
type hostEntry struct {
	Name      string `json:"name"`
	URL       string `json:"url,omitempty"`
	RemoteBin string `json:"remote_bin,omitempty"`
	// Checked by --check: OK says the host's daemon answered.
	OK      *bool  `json:"ok,omitempty"`
	Version string `json:"version,omitempty"`
	// Mismatch says the host's daemon runs another build than this kaimon.
	Mismatch bool   `json:"mismatch,omitempty"`
	Error    string `json:"error,omitempty"`
}

func hostCmd() *cli.Command {
	return &cli.Command{
		Name:  "host",
		Usage: "Keep the hosts whose agents kaimon drives over ssh",
		Description: "A host is another machine's kaimon-agentd, reached by the system's ssh (so ~/.ssh/config, the ssh agent, " +
			"ProxyJump and known_hosts all apply; KAIMON_SSH_COMMAND replaces ssh) running `kaimon dial-stdio` there. " +
			"The hosts are kept in the config file's \"hosts\". `kaimon --host NAME VERB ...` drives a host's agents, " +
			"and an id qualified as NAME/ID names its host wherever an id goes. local is this machine.",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "Add a host: a NAME for ssh://[USER@]HOST[:PORT] or kube://[NAMESPACE/]POD",
				ArgsUsage: "NAME URL",
				Description: "NAME is 1 to 64 letters, digits, '-', '_' or '.' (not local or any); URL is ssh://[USER@]HOST[:PORT], " +
					"an IPv6 HOST in brackets, or kube://[NAMESPACE/]POD[?container=NAME&context=NAME], a Kubernetes pod reached with " +
					"`kubectl exec -i POD -- kaimon dial-stdio` (KAIMON_KUBECTL_COMMAND replaces kubectl). A name already there is refused (exit 1): to replace it, rm it and add it again. " +
					"The kaimon run there is found on the remote PATH unless --remote-bin names it.",
				Flags: []cli.Flag{&cli.StringFlag{Name: "remote-bin", Usage: "the kaimon to run on the host, `PATH`", DefaultText: "kaimon on the remote PATH"}},
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 2, "NAME URL"); err != nil {
						return err
					}
					paths, err := config.Resolve()
					if err != nil {
						return err
					}
					name := c.Args().Get(0)
					if err := fleet.AddHost(paths.ConfigFile, name, fleet.Host{URL: c.Args().Get(1), RemoteBin: c.String("remote-bin")}); err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "added host %s (check it with `kaimon host ls --check`)\n", name)
					return nil
				},
			},
			{
				Name:  "ls",
				Usage: "List the hosts; with --check, whether each answers and its kaimon's version",
				Description: "Prints NAME, URL and REMOTE_BIN, local (this machine) first. --check asks every host's daemon its " +
					"status, in parallel, each within a bounded time (a dead link within 8 s): " +
					"it says ok and the remote version, or the error; it exits 1 when any host failed.",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "check", Usage: "reach each host and show its kaimon-agentd's version"}, jsonFlag()},
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 0, "no arguments"); err != nil {
						return err
					}
					return hostList(c)
				},
			},
			{
				Name:      "rm",
				Usage:     "Remove a host",
				ArgsUsage: "NAME",
				Description: "Removes NAME from the config file and ends its ssh master connection (unless another host reaches the same destination, " +
					"whose master it is too); its agents go on running there. " +
					"A name that is not configured is a usage error (exit 2) and changes nothing.",
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 1, "NAME"); err != nil {
						return err
					}
					paths, err := config.Resolve()
					if err != nil {
						return err
					}
					name := c.Args().First()
					hosts, err := fleet.LoadHosts(paths.ConfigFile)
					if err != nil {
						return err
					}
					if err := fleet.RemoveHost(paths.ConfigFile, name); err != nil {
						return err
					}
					// Its master connection goes with it, rather than
					// linger for ControlPersist; unless another host
					// shares it.
					removed := hosts[name]
					delete(hosts, name)
					fleet.StopMasterOf(c.Context, name, removed, hosts, paths.SockDir)
					fmt.Fprintf(c.App.Writer, "removed host %s\n", name)
					return nil
				},
			},
		},
	}
}

func hostList(c *cli.Context) error {
	paths, err := config.Resolve()
	if err != nil {
		return err
	}
	hosts, err := fleet.LoadHosts(paths.ConfigFile)
	if err != nil {
		return err
	}
	rows := []hostEntry{{Name: fleet.Local}}
	for _, n := range fleet.Names(hosts) {
		rows = append(rows, hostEntry{Name: n, URL: hosts[n].URL, RemoteBin: hosts[n].Bin()})
	}
	failed := 0
	if c.Bool("check") {
		f := &fleet.Fleet{Paths: paths, Hosts: hosts}
		ctx, cancel := context.WithTimeout(c.Context, hostCheckWait)
		defer cancel()
		var wg sync.WaitGroup
		for i := range rows {
			wg.Add(1)
			go func(r *hostEntry) {
				defer wg.Done()
				checkHost(ctx, c, f, r)
			}(&rows[i])
		}
		wg.Wait()
		for _, r := range rows {
			if !*r.OK {
				failed++
			}
		}
	}
	if err := emit(c, rows, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "NAME\tURL\tREMOTE_BIN")
		if c.Bool("check") {
			fmt.Fprint(tw, "\tCHECK")
		}
		fmt.Fprintln(tw)
		for _, r := range rows {
			url, bin := r.URL, r.RemoteBin
			if r.Name == fleet.Local {
				url, bin = "(this machine)", "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s", r.Name, url, bin)
			if r.OK != nil {
				switch {
				case !*r.OK:
					fmt.Fprintf(tw, "\tFAIL: %s", r.Error)
				case r.Version == "":
					fmt.Fprintf(tw, "\t%s", r.Error)
				case r.Mismatch:
					fmt.Fprintf(tw, "\tok, kaimon-agentd %s (this kaimon is %s)", r.Version, version.Full())
				default:
					fmt.Fprintf(tw, "\tok, kaimon-agentd %s", r.Version)
				}
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}); err != nil {
		return err
	}
	if failed > 0 {
		err := fmt.Errorf("%d of %d hosts failed the check", failed, len(rows))
		if c.Bool("json") {
			return &jsonReported{err: err}
		}
		return err
	}
	return nil
}

// checkHost asks one host's daemon its status. This machine's is never
// started by a check: one not running is no failure, it starts on use.
func checkHost(ctx context.Context, c *cli.Context, f *fleet.Fleet, r *hostEntry) {
	ok := false
	r.OK = &ok
	var st *apitype.DaemonStatus
	var err error
	if r.Name == fleet.Local {
		var cl *client.Client
		if cl, err = localClient(c); err == nil {
			st, err = pingOnly(ctx, cl)
		}
		if err == nil && st == nil {
			ok, r.Error = true, "kaimon-agentd not running (it starts on use)"
			return
		}
	} else {
		var cl *client.Client
		if cl, err = f.RemoteClient(r.Name); err == nil {
			defer cl.CloseIdleConnections()
			st, err = fleet.Handshake(ctx, cl, r.Name)
		}
	}
	if err != nil {
		r.Error = err.Error()
		return
	}
	ok, r.Version = true, version.Format(st.Version, st.Commit)
	r.Mismatch = version.Differs(version.String(), version.CommitString(), st.Version, st.Commit)
}
