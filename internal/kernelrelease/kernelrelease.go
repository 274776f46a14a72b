// Package kernelrelease reads a Linux kernel's release string (uname -r),
// for the features and settings that depend on the kernel's version.
package kernelrelease

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a kernel's major and minor version numbers.
type Version struct {
	Major, Minor int
}

// Parse reads the major and minor numbers at the start of a release such
// as "4.18.0-553.el8_10.x86_64" or "6.1.0-56-cloud-amd64".
func Parse(release string) (Version, error) {
	fields := strings.SplitN(release, ".", 3)
	if len(fields) >= 2 {
		// The minor number may run into the rest: "18-553.el8".
		digits := strings.IndexFunc(fields[1], func(r rune) bool { return r < '0' || r > '9' })
		if digits < 0 {
			digits = len(fields[1])
		}
		major, err := strconv.Atoi(fields[0])
		if err == nil {
			var minor int
			if minor, err = strconv.Atoi(fields[1][:digits]); err == nil {
				return Version{Major: major, Minor: minor}, nil
			}
		}
	}
	return Version{}, fmt.Errorf("kernel release %q: want it to start with MAJOR.MINOR", release)
}

// Before reports whether v is older than major.minor.
func (v Version) Before(major, minor int) bool {
	return v.Major < major || v.Major == major && v.Minor < minor
}

func (v Version) String() string { return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) }
