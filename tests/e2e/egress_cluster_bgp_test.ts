/**
 * Egress NAT in the lab cluster, the server behind a BGP router: the owner of each floating
 * address announces it (the EgressNAT's `spec.bgp`), the router's route follows the owner through
 * its node's death, its freeze, its delete and a rolled Deployment — never two next hops from the
 * delete on — and client pods on four nodes of a routed pod network keep TCP and UDP
 * (tests/e2e/_egress_cluster.ts says what runs and what is checked).
 */
import { rootTest } from "../harness/mod.ts";
import { egressClusterTest } from "./_egress_cluster.ts";

rootTest(
  "egress cluster BGP: the router's route follows the owner; client pods keep TCP and UDP through an owner's node death, freeze, delete and a rollout",
  (t) => egressClusterTest(t, "bgp"),
);
