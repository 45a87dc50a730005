/**
 * Pod-aware anycast end to end: three node namespaces each run `main.ts anycast` (and, through
 * it, bird2), a router namespace runs bird2 with BFD and `merge paths yes`; pods are HTTP
 * servers in the node namespaces. What a user notices: the router's kernel routes the LB /32
 * to exactly the nodes with a ready pod, a dead or hung node leaves the route within 300 ms,
 * and a drain withdraws before the pod stops so an HTTP load sees no failed request.
 */
import { rootTest } from "../harness/mod.ts";
import { AnycastLab } from "../../lab/anycast.ts";
import { clientSummary } from "../../lab/clients/summary.ts";

function assert(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Error(msg);
}

const same = (want: string[]) => (g: string[]) => g.join() === [...want].sort().join();

rootTest("anycast: the router's multipath route follows ready pods: 2 nodes, then 3", async () => {
  await using lab = await AnycastLab.create({ nodes: 3 });
  const route = await lab.watchRoute();
  assert(route.gateways.length === 0, `no pod yet, but the router routes to ${route.gateways}`);
  await lab.startPod("n1", "default/web-1");
  await lab.startPod("n2", "default/web-2");
  await route.until(same(["10.9.1.2", "10.9.2.2"]));
  const agent = lab.nodes.get("n1")!.agent;
  await agent.waitForLine((l) =>
    l.includes("assuming address 10.0.100.10") && l.includes("default/web-1")
  );
  // A pod that is not ready, or that the selector does not match, adds nothing.
  await lab.startPod("n3", "default/web-3", { ready: false });
  await lab.startPod("n3", "default/other-3", { labels: { app: "other" }, port: 0 });
  await new Promise((r) => setTimeout(r, 300));
  const still = route.gateways;
  assert(still.length === 2, `unready/unselected pods announced: ${still}`);
  await lab.updatePod("default/web-3", { ready: true });
  await route.until(same(["10.9.1.2", "10.9.2.2", "10.9.3.2"]));
  // The kernel really holds a 3-nexthop route (not only the monitor's view).
  const shown = await lab.topo.exec("router", ["ip", "route", "show", "10.0.100.10/32"]);
  assert((shown.stdout.match(/nexthop via/g) ?? []).length === 3, shown.stdout);
});
