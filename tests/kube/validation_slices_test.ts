/**
 * The test server's EndpointSlice rules, driven with kubectl: at most 1,000 endpoints and 100
 * ports, 1..100 addresses per endpoint, `addressType` immutable; and the cost of an update of a
 * Service with many ports (kubectl label on 1,000 ports was quadratic in managedFields).
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { kubectlEnv } from "./_kubectl.ts";
import { refused } from "./_refuse.ts";

function slice(name: string, endpoints: number, opts: { ports?: number; type?: string } = {}) {
  return JSON.stringify({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name, labels: { "kubernetes.io/service-name": "web" } },
    addressType: opts.type ?? "IPv4",
    ports: Array.from({ length: opts.ports ?? 1 }, (_, i) => ({ name: `p${i}`, port: 8080 + i })),
    endpoints: Array.from({ length: endpoints }, (_, i) => ({
      addresses: [`10.${244 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`],
    })),
  });
}

Deno.test("endpointslice validation", async (t) => {
  await using env = await kubectlEnv();
  const create = ["create", "-f", "-"];
  await t.step("1,001 endpoints are refused, 1,000 accepted", async () => {
    await refused(
      env,
      create,
      slice("big", 1001),
      'The EndpointSlice "big" is invalid: endpoints: Too many: 1001: must have at most 1000 items',
    );
    await env.ok(create, slice("big", 1000));
  });
  await t.step("101 ports are refused", async () => {
    await refused(
      env,
      create,
      slice("ports", 1, { ports: 101 }),
      "ports: Too many: 101: must have at most 100 items",
    );
  });
  await t.step("an endpoint without addresses is refused", async () => {
    const body = JSON.parse(slice("empty", 1));
    body.endpoints[0].addresses = [];
    await refused(
      env,
      create,
      JSON.stringify(body),
      "endpoints[0].addresses: Required value: must contain at least 1 address",
    );
  });
  await t.step("a port name must be an RFC 1123 label", async () => {
    const body = JSON.parse(slice("named", 1));
    body.ports[0].name = "Bad_Name";
    await refused(
      env,
      create,
      JSON.stringify(body),
      'ports[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label',
    );
  });
  await t.step("addressType is immutable", async () => {
    await env.ok(create, slice("fixed", 1));
    await refused(
      env,
      ["patch", "endpointslice", "fixed", "--type=merge", "-p", '{"addressType":"FQDN"}'],
      undefined,
      'addressType: Invalid value: "FQDN": field is immutable',
    );
  });
});

Deno.test("kubectl label on a Service with 4,000 ports costs about 8× one with 500 (linear)", async () => {
  await using env = await kubectlEnv();
  const type = env.server.rest.registry.types.find((t) => t.kind === "Service" && t.group === "")!;
  // Timed in the server process (kubectl's own start-up would drown the difference); the best of
  // three runs each, and a bound (24×) between linear (8×) and quadratic (64×, the old cost).
  const cost = async (n: number) => {
    const ports = Array.from({ length: n }, (_, i) => ({ name: `p${i}`, port: 1000 + i }));
    await env.ok(
      ["create", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: `s${n}` },
        spec: { type: "ClusterIP", ports },
      }),
    );
    await env.ok(["label", "service", `s${n}`, "round=0"]);
    let best = Infinity;
    for (let i = 1; i <= 3; i++) {
      const t0 = performance.now();
      env.server.rest.patch(type, "default", `s${n}`, "merge", {
        metadata: { labels: { round: String(i) } },
      }, { manager: "kubectl-label" });
      best = Math.min(best, performance.now() - t0);
    }
    return best;
  };
  const small = await cost(500), large = await cost(4000);
  console.log(JSON.stringify({ ports500Ms: small, ports4000Ms: large, ratio: large / small }));
  ok(large / small < 24, `4,000 ports cost ${large / small}× 500 ports`);
  const labels = await env.ok(["get", "svc", "s4000", "-o", "jsonpath={.metadata.labels.round}"]);
  deepStrictEqual(labels, "3");
});
