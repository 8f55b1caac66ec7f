package cli

import (
	"context"
	"io"
	"net"

	"github.com/urfave/cli/v2"

	"github.com/kaimon/kaimon/internal/client"
)

// dialStdioCmd is the far end of --host: ssh runs it on the host, and its
// stdin and stdout become a connection to that user's own daemon, as
// `docker system dial-stdio` does for DOCKER_HOST=ssh://. Nothing listens
// on a network: the daemon is reached over its unix socket, whose peer
// check sees this process, the ssh user's.
func dialStdioCmd() *cli.Command {
	return &cli.Command{
		Name:  "dial-stdio",
		Usage: "Bridge stdin and stdout to kaimon-agentd's socket (what --host runs over ssh)",
		Description: "Copies stdin to this user's kaimon-agentd socket and the daemon's answers to stdout, starting the daemon " +
			"first when it is not running (unless --no-autostart). `kaimon --host NAME ...` runs `ssh HOST kaimon dial-stdio` " +
			"on the host (or the host's remote_bin), so a remote daemon is that ssh user's own and nothing listens on a network. " +
			"It exits when the daemon closes the connection; at the end of stdin it closes its half and waits for the daemon's.",
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, "no arguments"); err != nil {
				return err
			}
			cl, err := client.New()
			if err != nil {
				return err
			}
			if c.Bool("no-autostart") {
				cl.NoAutostart = true
			}
			conn, err := cl.Connect(c.Context)
			if err != nil {
				return err
			}
			return bridge(c.Context, conn, c.App.Reader, c.App.Writer)
		},
	}
}

// bridge copies in to conn and conn to out until the daemon's side ends
// (or ctx does). The end of in closes conn's write half only: the daemon
// still answers what it was asked, then closes.
func bridge(ctx context.Context, conn net.Conn, in io.Reader, out io.Writer) error {
	defer conn.Close()
	go func() {
		_, _ = io.Copy(conn, in)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			conn.Close()
		}
	}()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, conn)
		if cl, ok := out.(io.Closer); ok {
			_ = cl.Close() // the far side reads its end
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	}
}
