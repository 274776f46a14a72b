#!/bin/sh
# Regenerates strace/*.txt: what the real conntrack program (conntrack-tools
# 1.4.7) sends to ctnetlink, and one dump the kernel sent back, as strace hex
# dumps. Run as root; works in a throwaway network namespace:
#
#	unshare -n sh testdata/capture.sh
set -e
cd "$(dirname "$0")/strace"
ip link set lo up
# trace NAME ARGS...: the message conntrack sends on its first socket.
trace() {
	name=$1
	shift
	strace -o "$name.txt" -e trace=sendto -e write=3 -xx -s 4096 conntrack "$@" >/dev/null 2>&1 || true
}
trace create4 -I -p udp -s 10.0.0.1 -d 10.0.0.2 --sport 1000 --dport 53 -t 100
trace create4-full -I -p udp -s 10.0.0.1 -d 10.0.0.3 --sport 1000 --dport 53 -t 100 -u ASSURED -m 7 -w 3
trace create6 -I -p udp -s fd00::1 -d fd00::2 --sport 1000 --dport 53 -t 100
conntrack -I -p tcp -s fd00::1 -d fd00::2 --sport 1000 --dport 80 -t 100 --state ESTABLISHED >/dev/null 2>&1
trace get4 -G -p udp -s 10.0.0.1 -d 10.0.0.2 --sport 1000 --dport 53
trace get6 -G -p udp -s fd00::1 -d fd00::2 --sport 1000 --dport 53
trace count -C
trace dump4 -L -f ipv4
trace dump-mark -L -m 5/0xff
strace -o dump-reply.txt -e trace=recvmsg -e read=3 -xx -s 8192 conntrack -L >/dev/null 2>&1
# The delete conntrack -D sends after its dump, on its second socket.
strace -o delete4.txt -e trace=sendto -e write=4 -xx -s 4096 conntrack -D -p udp -s 10.0.0.1 -d 10.0.0.2 --sport 1000 --dport 53 >/dev/null 2>&1
trace flush -F
trace flush6 -F -f ipv6
