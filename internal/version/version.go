// Package version holds kaimon's build stamp: set with
// -ldflags "-X github.com/kaimon/kaimon/internal/version.Version=v1.2.3",
// else taken from the module build info.
package version

import "runtime/debug"

// Version is stamped at build time.
var Version = ""

// String is the version to show.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}
