package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/apitype"
	"github.com/kaimon/kaimon/internal/client"
	"github.com/kaimon/kaimon/internal/version"
)

// pingWait bounds the status ping of the commands that only look at the
// daemon (version, doctor): a wedged daemon must not hang them.
const pingWait = 5 * time.Second

// Build is one program's build stamp.
type Build struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
}

// versionInfo is `kaimon version --json`.
type versionInfo struct {
	CLI Build `json:"cli"`
	// Daemon is the running kaimon-agentd's build, null when none answers.
	Daemon *daemonBuild `json:"daemon"`
	// Mismatch says the two differ: the daemon runs other code than this CLI.
	Mismatch bool `json:"mismatch"`
}

type daemonBuild struct {
	Build
	PID int `json:"pid"`
}

func (b Build) String() string { return version.Format(b.Version, b.Commit) }

// cliBuild is this binary's stamp.
func cliBuild() Build { return Build{Version: version.String(), Commit: version.CommitString()} }

// differs says whether the daemon runs other code than the CLI, by
// version.Differs' rule (the commits decide when both are known).
func (b Build) differs(o Build) bool {
	return version.Differs(b.Version, b.Commit, o.Version, o.Commit)
}

// pingOnly asks the daemon for its status without ever starting it. A
// daemon that is not running is (nil, nil).
func pingOnly(ctx context.Context, cl *client.Client) (*apitype.DaemonStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, pingWait)
	defer cancel()
	st, err := cl.Ping(ctx)
	var down *client.DaemonDownError
	if errors.As(err, &down) {
		return nil, nil
	}
	return st, err
}

// mismatchWarning is the stderr line for a daemon that runs other code.
func mismatchWarning(cli Build, st *apitype.DaemonStatus) string {
	d := Build{Version: st.Version, Commit: st.Commit}
	return fmt.Sprintf("kaimon-agentd (pid %d) runs %s but this kaimon is %s: run `kaimon daemon restart` to run this version "+
		"(it closes the live agents)", st.PID, d, cli)
}

func versionCmd() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "Show the versions of kaimon and of the running kaimon-agentd",
		Description: "Prints this kaimon's version and commit, and those of the kaimon-agentd that runs now (it never starts one: " +
			"\"not running\" is an answer). When they differ it warns on stderr: `kaimon daemon restart` makes the daemon run " +
			"this version. `kaimon --version` prints this kaimon's version and commit alone.",
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, "no arguments"); err != nil {
				return err
			}
			info := versionInfo{CLI: cliBuild()}
			cl, err := client.New()
			if err != nil {
				return err
			}
			st, err := pingOnly(c.Context, cl)
			if err != nil {
				return fail(c, fmt.Errorf("asking kaimon-agentd its version: %w", err))
			}
			if st != nil {
				info.Daemon = &daemonBuild{Build: Build{Version: st.Version, Commit: st.Commit}, PID: st.PID}
				info.Mismatch = info.CLI.differs(info.Daemon.Build)
			}
			if err := emit(c, info, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintf(tw, "kaimon\t%s\n", info.CLI)
				if info.Daemon == nil {
					fmt.Fprintf(tw, "kaimon-agentd\tnot running\n")
				} else {
					fmt.Fprintf(tw, "kaimon-agentd\t%s (pid %d)\n", info.Daemon.Build, info.Daemon.PID)
				}
				tw.Flush()
			}); err != nil {
				return err
			}
			if info.Mismatch {
				fmt.Fprintf(c.App.ErrWriter, "kaimon: warning: %s\n", mismatchWarning(info.CLI, st))
			}
			return nil
		},
	}
}
