module github.com/ipvsplane/ipvsplane

go 1.25.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/google/nftables v0.3.0
	github.com/mdlayher/netlink v1.11.2
	golang.org/x/sys v0.43.0
)

require (
	github.com/mdlayher/socket v0.6.0 // indirect
	golang.org/x/net v0.53.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
)
