/**
 * The egress NAT config (the file source and the shape the controller publishes to Redis). It
 * lives in `controller/egress/config.ts`, where both the Kubernetes controller (which validates
 * what it derives from an `EgressNAT`) and the NAT pods' agents can import it.
 *
 * @module
 */
export * from "../../controller/egress/config.ts";
