/**
 * The Redis lease of a floating address (epochs as fencing tokens). It lives in
 * `controller/egress/lease.ts`, where the Kubernetes controller (which reads the leases into
 * `EgressNAT` `status.owners`) and the NAT pods' ownership can import it.
 *
 * @module
 */
export * from "../../controller/egress/lease.ts";
