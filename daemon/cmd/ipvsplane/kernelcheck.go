package main

import (
	"fmt"

	"github.com/ipvsplane/ipvsplane/internal/kernelrelease"
	"golang.org/x/sys/unix"
)

// unameRelease is the running kernel's release (uname -r).
func unameRelease() (string, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(uts.Release[:]), nil
}

// checkNATCore refuses a kernel older than 4.18. ipvsplane's nftables
// nat chains leave to the iptables nat tables the connections they do
// not translate, which holds only where the NAT core walks every table's
// nat chains at a hook in one list until one binds (nf_nat_inet_fn, 4.18).
// Before it each table binds on its own, and ipvsplane's chains, which
// run first, would bind every new connection to no translation.
func checkNATCore(release string) error {
	v, err := kernelrelease.Parse(release)
	if err != nil {
		return err
	}
	if v.Before(4, 18) {
		return fmt.Errorf("kernel %s is older than 4.18, which ipvsplane needs: before 4.18 each nat table binds connections on its own, "+
			"so ipvsplane's nftables nat chains, which run first, would take every new connection from the iptables nat tables "+
			"(Docker's and portmap's DNAT, the pods' masquerade would stop working)", release)
	}
	return nil
}

// checkKernel refuses to program a kernel ipvsplane cannot share with
// other NAT rules (see checkNATCore).
func (a *app) checkKernel() error {
	release, err := a.kernelRelease()
	if err != nil {
		return err
	}
	return checkNATCore(release)
}
