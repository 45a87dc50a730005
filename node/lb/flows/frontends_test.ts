import { ok } from "node:assert/strict";
import { ServingBackends } from "./frontends.ts";
import { purgeRemovedBackends } from "./purge.ts";
import { MemoryFlowStore } from "./_memory_store.ts";
import { makeFlowKey } from "../../bpf/flow.ts";
import { flowField } from "./field.ts";
import { captureLogs } from "../../../lib/log.ts";
import { parseIpv4 } from "../../../lib/ipv4.ts";

const VIP = "10.0.100.1";
const key = (dport: number, proto = 6) =>
  makeFlowKey({ saddr: "10.0.0.1", daddr: VIP, sport: 4000, dport, proto });

Deno.test("serving backends: by frontend and protocol, entries of one name united, redirects", () => {
  const serving = new ServingBackends({
    services: [
      { name: "a/web", frontends: [{ address: `${VIP}:80/TCP` }], backends: [] },
      { name: "a/web", frontends: [], backends: [{ address: "10.0.1.2:8080/TCP" }] },
      {
        name: "a/dns",
        frontends: [{ address: `${VIP}:53/UDP` }],
        backends: [{ address: "10.0.1.3:53/UDP" }],
      },
      { name: "a/local", frontends: [], backends: [{ address: "10.0.9.9:8080/TCP" }] },
    ],
    redirects: [{ service: "a/web", target: "a/local" }],
  });
  ok(serving.check(key(80), parseIpv4("10.0.1.2")) === null, "own backend");
  ok(serving.check(key(80), parseIpv4("10.0.9.9")) === null, "redirect target's backend");
  ok(serving.check(key(80), parseIpv4("10.0.1.3")) === "backend_not_serving", "other's");
  ok(serving.check(key(53, 17), parseIpv4("10.0.1.3")) === null, "UDP frontend");
  ok(serving.check(key(53, 6), parseIpv4("10.0.1.3")) === "unknown_frontend", "TCP 53");
  ok(new ServingBackends(null).check(key(80), 1) === "unknown_frontend", "no config");
});

Deno.test("purge scope: removing a backend from one frontend keeps other frontends' flows to it", async () => {
  using _logs = captureLogs();
  const store = new MemoryFlowStore();
  const backend = parseIpv4("10.0.1.2");
  await store.learn(VIP, [9000, 8000].map((p) => ({ field: flowField(key(p)), backend })), {
    node: "lb-a",
    nowMs: Date.now(),
    idleTimeoutMs: 60_000,
  });
  const config = (eight: string[]) => ({
    services: [
      {
        name: "a/nine",
        frontends: [{ address: `${VIP}:9000/TCP` }],
        backends: [{ address: "10.0.1.2:7000/TCP" }],
      },
      {
        name: "a/eight",
        frontends: [{ address: `${VIP}:8000/TCP` }],
        backends: eight.map((b) => ({ address: `${b}:7000/TCP` })),
      },
    ],
  });
  const n = await purgeRemovedBackends(config(["10.0.1.2"]), config([]), { store });
  ok(n === 1, `purged ${n}`);
  ok(store.stored(VIP, flowField(key(9000))) !== undefined, "port 9000 flow kept");
  ok(store.stored(VIP, flowField(key(8000))) === undefined, "port 8000 flow purged");
});

Deno.test("serving backends: IPv6 frontends checked like IPv4 ones, backends of either family", () => {
  const serving = new ServingBackends({
    services: [{
      name: "a/dual",
      frontends: [{ address: "[2001:db8:100::1]:80/TCP" }, { address: `${VIP}:80/TCP` }],
      backends: [{ address: "[2001:db8:2::3]:8080/TCP" }, { address: "10.0.1.2:8080/TCP" }],
    }],
  });
  ok(serving.check(key(80), parseIpv4("10.0.1.2")) === null, "IPv4 backend of the service");
  ok(serving.check(key(80), parseIpv4("10.0.1.9")) === "backend_not_serving", "not one");
  const key6 = { saddr: "2001:db8::5", daddr: "2001:db8:100::1", sport: 4000, dport: 80, proto: 6 };
  ok(serving.check(key6, "2001:db8:2::3") === null, "IPv6 backend of the IPv6 frontend");
  ok(serving.check(key6, parseIpv4("10.0.1.2")) === null, "IPv4 backend of the IPv6 frontend");
  ok(serving.check(key6, "2001:db8:2::9") === "backend_not_serving", "not one");
  ok(serving.check({ ...key6, dport: 81 }, "2001:db8:2::3") === "unknown_frontend", "port 81");
});
