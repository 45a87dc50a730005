import { deepStrictEqual } from "node:assert/strict";
import { backendsByService, createLBTables, Writer } from "../tables/mod.ts";
import { DB } from "../../../lib/statedb/mod.ts";
import type { K8sEndpointSlice } from "./k8s_convert.ts";
import { K8sSource } from "./k8s_source.ts";

function slice(name: string, ips: string[]): K8sEndpointSlice {
  return {
    kind: "EndpointSlice",
    metadata: { name, namespace: "ns", labels: { "kubernetes.io/service-name": "svc" } },
    ports: [{ name: "http", port: 80 }],
    endpoints: ips.map((ip) => ({ addresses: [ip] })),
  };
}

Deno.test("k8s source: a service's backends are the union of its slices", () => {
  const tables = createLBTables(new DB());
  const k8s = new K8sSource(new Writer(tables));
  const addrs = () =>
    tables.backends.list(tables.db.readTxn(), backendsByService("ns/svc")).map((b) =>
      b.address.split(":")[0]
    );
  k8s.apply([{ type: "add", object: slice("a", ["10.0.0.1", "10.0.0.2"]) }]);
  deepStrictEqual(addrs(), ["10.0.0.1", "10.0.0.2"]);
  k8s.apply([{ type: "add", object: slice("b", ["10.0.0.3"]) }]);
  deepStrictEqual(addrs(), ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
  k8s.apply([{ type: "update", object: slice("a", ["10.0.0.2"]) }]);
  deepStrictEqual(addrs(), ["10.0.0.2", "10.0.0.3"]);
  k8s.apply([{ type: "delete", object: slice("b", []) }]);
  deepStrictEqual(addrs(), ["10.0.0.2"]);
  k8s.apply([{ type: "update", object: slice("a", ["10.0.0.4"]) }]);
  deepStrictEqual(addrs(), ["10.0.0.4"]);
  k8s.apply([{ type: "delete", object: slice("a", []) }]);
  deepStrictEqual(addrs(), []);
});
