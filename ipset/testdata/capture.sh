#!/bin/sh
# Regenerates strace/*.strace: the netlink messages ipset(8) exchanges with
# the kernel, as the expected bytes for the unit tests. Needs root, ipset
# and strace; runs in a throwaway network namespace (unshare -n).
#   unshare -n sh testdata/capture.sh   (from the package directory)
set -eu
out=testdata/strace
trace() {
	name=$1
	shift
	strace -qq -e trace=sendto,recvmsg -e write=3,4 -e read=3,4 -o "$out/$name.strace" ipset "$@" || true
}
trace create_hash_ip_port create kube hash:ip,port family inet hashsize 1024 maxelem 65536
trace create_exist -exist create kube hash:ip,port family inet hashsize 1024 maxelem 65536
trace create_bitmap_port create b bitmap:port range 0-1000 timeout 100 counters comment
trace create_hash_ip6 create h6 hash:ip family inet6 hashsize 64 maxelem 100 timeout 300 counters comment
ipset create n hash:net comment
ipset create ipn hash:ip,port,net family inet6
ipset create ipp hash:ip,port,ip
ipset create np hash:net,port
ipset create a hash:ip
ipset create x hash:ip
trace add_ip_port add kube 10.0.0.1,tcp:80
trace add_exist -exist add kube 10.0.0.1,tcp:80
trace add_net_comment add n 10.0.0.0/8 comment hi
trace add_ip_port_net6 add ipn fd00::1,udp:53,fd00::/64
trace add_ip_port_ip add ipp 10.0.0.2,tcp:8080,10.0.0.2
trace add_net_port add np 10.1.0.0/16,sctp:9
trace add_bitmap add b 81 timeout 0 comment x
trace add_duplicate add kube 10.0.0.1,tcp:80
trace test_member test kube 10.0.0.1,tcp:80
trace test_missing test kube 10.0.0.9,tcp:80
trace del del kube 10.0.0.1,tcp:80
trace del_missing del kube 10.0.0.1,tcp:80
ipset add kube 10.0.0.1,tcp:80
ipset add n 10.0.0.1
ipset add b 80
trace list_names list -n
trace list_header list -t kube
trace list_kube list kube
trace list_n list n
trace list_b list b
trace list_ipn list ipn
trace list_ipp list ipp
trace list_np list np
trace flush flush x
trace rename rename x y
trace swap swap a y
trace destroy destroy y
trace destroy_missing destroy nope
printf 'add kube 10.0.0.2,udp:53\nadd kube 10.0.0.3,sctp:9\nadd kube 10.0.0.4,tcp:443\n' >/tmp/ipset-capture-ok
trace restore -f /tmp/ipset-capture-ok restore
printf 'add kube 10.0.0.5,tcp:1\nadd kube 10.0.0.1,tcp:80\nadd kube 10.0.0.6,tcp:1\n' >/tmp/ipset-capture-dup
trace restore_duplicate -f /tmp/ipset-capture-dup restore
rm -f /tmp/ipset-capture-ok /tmp/ipset-capture-dup
