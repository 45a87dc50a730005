/**
 * Egress NAT in the lab cluster, floating addresses on the external segment moved by gratuitous
 * ARP: client pods on a routed pod network keep TCP and UDP through an owner's node death and its
 * successor's delete (tests/e2e/_egress_cluster.ts says what runs and what is checked).
 */
import { rootTest } from "../harness/mod.ts";
import { egressClusterTest } from "./_egress_cluster.ts";

rootTest(
  "egress cluster: client pods on a routed pod network keep TCP and UDP through an owner's node death and its successor's delete",
  (t) => egressClusterTest(t, "garp"),
);
