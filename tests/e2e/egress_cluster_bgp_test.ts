/**
 * Egress NAT in the lab cluster, the server behind a BGP router: the owner of each floating
 * address announces it (the EgressNAT's `spec.bgp`), the router's route follows the owner through
 * its node's death, its freeze, its delete and a rolled Deployment — never two next hops from the
 * delete on — and client pods on four nodes of a routed pod network keep TCP and UDP
 * (tests/e2e/_egress_cluster.ts says what runs and what is checked).
 *
 * Opt-in (`HF_EGRESS_CLUSTER_BGP=1`) until the gap it still finds is closed (docs/egress.md "Not
 * yet"): in a fresh-clone CI rehearsal, the clients of one floating address lost every TCP
 * connection (their UDP streams kept going) after the owner frozen by SIGSTOP took the address back
 * by rebalance once its BGP session returned; the NAT pods' logs show the address's 27 conntrack
 * entries resynced to it before it assumed. 2 more runs of 8 failed the same way on a loaded
 * machine. The ARP variant (egress_cluster_test.ts) runs the same four scenarios in every CI run.
 */
import { rootTest } from "../harness/mod.ts";
import { egressClusterTest } from "./_egress_cluster.ts";

const NAME =
  "egress cluster BGP: the router's route follows the owner; client pods keep TCP and UDP through an owner's node death, freeze, delete and a rollout";

if (Deno.env.get("HF_EGRESS_CLUSTER_BGP") === "1") {
  rootTest(NAME, (t) => egressClusterTest(t, "bgp"));
} else {
  Deno.test({
    name: `${NAME} (opt-in: HF_EGRESS_CLUSTER_BGP=1; docs/egress.md "Not yet")`,
    ignore: true,
    fn() {},
  });
}
