// Package ipvs compares package ipvs of the library with moby/ipvs: its
// tests and benchmarks run both on the same kernel. They live in the daemon
// module so that the library's module does not require moby/ipvs.
package ipvs
