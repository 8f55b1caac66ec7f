package local

import (
	"fmt"

	"github.com/kaimon/kaimon/internal/confine"
	"github.com/kaimon/kaimon/internal/proc"
)

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }

func procRunning(pid int) bool { return proc.Running(pid) }

func confineNew(dir string) (confine.Root, error) { return confine.New(dir) }
