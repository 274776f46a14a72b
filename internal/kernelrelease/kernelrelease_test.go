package kernelrelease

import "testing"

func TestParse(t *testing.T) {
	for release, want := range map[string]Version{
		"3.10.0-1160.el7.x86_64":   {3, 10},
		"4.18.0-553.el8_10.x86_64": {4, 18},
		"5.10.0-28-amd64":          {5, 10},
		"6.1.0-56-cloud-amd64":     {6, 1},
		"4.19-rc1":                 {4, 19},
		"10.2":                     {10, 2},
	} {
		got, err := Parse(release)
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", release, got, err, want)
		}
	}
	for _, bad := range []string{"", "6", "linux", "x.1", "6.x"} {
		if v, err := Parse(bad); err == nil {
			t.Errorf("%q: %v, no error", bad, v)
		}
	}
}

func TestBefore(t *testing.T) {
	for _, tt := range []struct {
		v    Version
		want bool
	}{
		{Version{3, 10}, true}, {Version{4, 17}, true}, {Version{4, 18}, false},
		{Version{4, 19}, false}, {Version{5, 0}, false}, {Version{6, 1}, false},
	} {
		if got := tt.v.Before(4, 18); got != tt.want {
			t.Errorf("%v.Before(4, 18) = %v, want %v", tt.v, got, tt.want)
		}
	}
}
