/**
 * Egress NAT in the lab cluster, floating addresses on the external segment moved by gratuitous
 * ARP: client pods on four nodes of a routed pod network keep TCP and UDP through an owner's node
 * death, freeze, delete and a rolled Deployment (tests/e2e/_egress_cluster.ts says what runs and
 * what is checked).
 */
import { rootTest } from "../harness/mod.ts";
import { egressClusterTest } from "./_egress_cluster.ts";

rootTest(
  "egress cluster: client pods on a routed pod network keep TCP and UDP through an owner's node death, freeze, delete and a rollout",
  (t) => egressClusterTest(t, "garp"),
);
