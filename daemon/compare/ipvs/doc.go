// Package ipvs compares package ipvs of the library with moby/ipvs: its
// tests and benchmarks run both on the same kernel. It also proves
// compat/moby/ipvs a drop-in for moby/ipvs: the same exported API, read
// from both sources, and the same kernel state from the same calls. They live in the daemon
// module so that the library's module does not require moby/ipvs.
package ipvs
