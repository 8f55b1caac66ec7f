// Command kaimon drives headless coding agents owned by kaimon-agentd.
package main

import (
	"os"

	"github.com/kaimon/kaimon/internal/cli"
)

func main() { os.Exit(cli.Main()) }
