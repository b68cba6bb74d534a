// Package tools holds what an operator runs beside the servers: the
// trace-driven simulator (sim), the load generator (loadgen) and the sample
// site generator (site).
//
// Tools import internal/base and the cluster tier's decision code (policy,
// placement, peer digests), so the simulator runs the policies the front runs;
// no server package imports a tool.
package tools
