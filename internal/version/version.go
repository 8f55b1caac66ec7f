// Package version holds kaimon's build stamp: scripts/install.sh sets it with
// -ldflags "-X github.com/kaimon/kaimon/internal/version.Version=v1.2.3
// -X github.com/kaimon/kaimon/internal/version.Commit=abc123", else it is
// taken from the module build info, as gh's internal/build does.
package version

import "runtime/debug"

// Version and Commit are stamped at build time.
var (
	Version = ""
	Commit  = ""
)

// String is the version to show.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
		if rev := setting(bi, "vcs.revision"); len(rev) >= 12 {
			return "dev-" + rev[:12]
		}
	}
	return "dev"
}

// CommitString is the commit the binary was built from: the stamp, else
// the VCS revision the go tool recorded (with "-dirty" for a modified
// tree), else "".
func CommitString() string {
	if Commit != "" {
		return Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if rev := setting(bi, "vcs.revision"); rev != "" {
			if setting(bi, "vcs.modified") == "true" {
				rev += "-dirty"
			}
			return rev
		}
	}
	return ""
}

// Full is the version followed by the commit when one is known, as
// `kaimon --version` and `kaimon-agentd --version` print it (`kaimon
// version` prints the same for the CLI and the daemon from their stamps).
func Full() string { return Format(String(), CommitString()) }

// Format is how kaimon shows a build: the version, followed by the commit
// when one is known.
func Format(version, commit string) string {
	if commit != "" {
		return version + " (commit " + commit + ")"
	}
	return version
}

func setting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// Differs says whether two builds (version, commit) run other code. When
// both know their commit, the commits alone decide: the version string of
// one commit differs by how it was built (scripts/build.sh stamps `git
// describe`, a plain go build says dev-<rev12> or the module version), so
// comparing versions would warn about the same code. The commits compare as
// whole strings, "-dirty" included: a clean build and a dirty one of the
// same commit may run other code, so they differ; two dirty builds of one
// commit cannot be told apart and pass as the same. Only when a commit is
// unknown (empty, or build.sh's "unknown") do the versions decide.
// `kaimon version`, `kaimon doctor` and a remote host's first exchange
// (internal/fleet) all ask this.
func Differs(v1, c1, v2, c2 string) bool {
	if knownCommit(c1) && knownCommit(c2) {
		return c1 != c2
	}
	return v1 != v2
}

// knownCommit says whether a build stamp's commit names one.
func knownCommit(c string) bool { return c != "" && c != "unknown" }
