package cli

import "testing"

func TestBuildDiffers(t *testing.T) {
	t.Parallel()
	const c1, c2 = "0123456789abcdef0123456789abcdef01234567", "89abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name string
		a, b Build
		want bool
	}{
		{"same commit, build.sh vs go build versions", Build{"v1.2.0-3-g0123456", c1}, Build{"dev-0123456789ab", c1}, false},
		{"same commit, module version", Build{"v1.2.0", c1}, Build{"v1.2.0-3-g0123456", c1}, false},
		{"other commit, same version", Build{"v1.2.0", c1}, Build{"v1.2.0", c2}, true},
		{"clean vs dirty of one commit", Build{"v1.2.0", c1}, Build{"v1.2.0-dirty", c1 + "-dirty"}, true},
		{"both dirty of one commit", Build{"a", c1 + "-dirty"}, Build{"b", c1 + "-dirty"}, false},
		{"one commit unknown: versions decide", Build{"v1", ""}, Build{"v1", c1}, false},
		{"one commit unknown, other version", Build{"v1", ""}, Build{"v2", c1}, true},
		{"build.sh's unknown is no commit", Build{"v1", "unknown"}, Build{"v1", c2}, false},
		{"both unknown, other version", Build{"v1", "unknown"}, Build{"v2", "unknown"}, true},
	} {
		if got := tc.a.differs(tc.b); got != tc.want {
			t.Errorf("%s: %v.differs(%v) = %v, want %v", tc.name, tc.a, tc.b, got, tc.want)
		}
		if got := tc.b.differs(tc.a); got != tc.want {
			t.Errorf("%s (swapped): %v.differs(%v) = %v, want %v", tc.name, tc.b, tc.a, got, tc.want)
		}
	}
}
