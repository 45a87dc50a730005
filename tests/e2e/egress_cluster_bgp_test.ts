/**
 * Egress NAT in the lab cluster, the server behind a BGP router: the owner of each floating
 * address announces it (the EgressNAT's `spec.bgp`), the router's route follows the owner through
 * its node's death and its successor's delete, and client pods on a routed pod network keep TCP
 * and UDP (tests/e2e/_egress_cluster.ts says what runs and what is checked).
 */
import { rootTest } from "../harness/mod.ts";
import { egressClusterTest } from "./_egress_cluster.ts";

rootTest(
  "egress cluster BGP: the router's route follows the owner; client pods keep TCP and UDP through an owner's node death and its successor's delete",
  (t) => egressClusterTest(t, "bgp"),
);
