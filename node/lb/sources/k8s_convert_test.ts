import { deepStrictEqual, throws } from "node:assert/strict";
import { convertEndpointSlice, convertService, sliceServiceName } from "./k8s_convert.ts";

Deno.test("k8s convert: LoadBalancer service → frontends per ingress IP (IPv4 and IPv6) × port", () => {
  const s = convertService({
    metadata: { name: "web", namespace: "shop", annotations: { "holdfast.io/maglev-size": "257" } },
    spec: {
      type: "LoadBalancer",
      clusterIP: "10.96.0.10",
      externalIPs: ["192.0.2.7", "2001:db8::1"],
      sessionAffinity: "ClientIP",
      ports: [{ name: "http", port: 80 }, { name: "dns", port: 53, protocol: "UDP" }, {
        name: "s",
        port: 9,
        protocol: "SCTP",
      }],
    },
    status: {
      loadBalancer: {
        ingress: [{ ip: "10.0.100.1" }, { ip: "10.0.100.1" }, { ip: "2001:DB8:100:0::1" }],
      },
    },
  });
  deepStrictEqual(s, {
    name: "shop/web",
    flowKeyMode: "client-ip",
    maglevSize: 257,
    frontends: [
      { address: "10.0.100.1:80/TCP", portName: "http" },
      { address: "10.0.100.1:53/UDP", portName: "dns" },
      { address: "[2001:db8:100::1]:80/TCP", portName: "http" },
      { address: "[2001:db8:100::1]:53/UDP", portName: "dns" },
      { address: "192.0.2.7:80/TCP", portName: "http" },
      { address: "192.0.2.7:53/UDP", portName: "dns" },
      { address: "[2001:db8::1]:80/TCP", portName: "http" },
      { address: "[2001:db8::1]:53/UDP", portName: "dns" },
    ],
  });
  const c = convertService({
    metadata: { name: "c" },
    spec: { clusterIP: "10.96.0.1", ports: [{ port: 443 }] },
  }, {
    includeClusterIP: true,
  });
  deepStrictEqual(c.frontends, [{ address: "10.96.0.1:443/TCP", portName: "" }]);
  deepStrictEqual(c.name, "default/c");
});

Deno.test("k8s convert: bad annotations and missing names are errors that say why", () => {
  throws(
    () =>
      convertService({
        metadata: { name: "x", annotations: { "holdfast.io/flow-key": "random" } },
      }),
    /annotation holdfast\.io\/flow-key="random"/,
  );
  throws(() => convertService({ metadata: {} }), /metadata\.name is missing/);
  for (const [value, why] of [["1000", "must be prime"], ["7", "a prime in 251..131071"]]) {
    throws(
      () =>
        convertService({
          metadata: {
            name: "x",
            namespace: "n",
            annotations: { "holdfast.io/maglev-size": value! },
          },
        }),
      (e: unknown) =>
        e instanceof Error &&
        e.message.includes(
          `Cannot convert service "n/x": annotation holdfast.io/maglev-size="${value}": ` +
            `Invalid Maglev table size M=${value}`,
        ) &&
        e.message.includes(why!),
    );
  }
  throws(
    () =>
      convertService({
        metadata: { name: "x", annotations: { "holdfast.io/maglev-size": "0x3fd" } },
      }),
    /maglev-size="0x3fd": Invalid Maglev table size M=NaN/,
  );
});

Deno.test("k8s convert: EndpointSlice conditions → active / terminating / quarantined", () => {
  const slice = {
    metadata: { name: "web-1", namespace: "shop", labels: { "kubernetes.io/service-name": "web" } },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080 }],
    endpoints: [
      { addresses: ["10.1.0.1"], conditions: { ready: true }, zone: "a" },
      { addresses: ["10.1.0.2"], conditions: { ready: false } },
      { addresses: ["10.1.0.3"], conditions: { ready: false, serving: true, terminating: true } },
      { addresses: ["10.1.0.4"], conditions: { ready: false, serving: false, terminating: true } },
      { addresses: ["10.1.0.5"] },
    ],
  };
  deepStrictEqual(sliceServiceName(slice), "shop/web");
  deepStrictEqual(convertEndpointSlice(slice), [
    { address: "10.1.0.1:8080/TCP", portName: "http", state: "active", zone: "a" },
    // Not ready: no new flows, its established ones stay (a readiness blip cuts nothing).
    { address: "10.1.0.2:8080/TCP", portName: "http", state: "quarantined", zone: undefined },
    { address: "10.1.0.3:8080/TCP", portName: "http", state: "terminating", zone: undefined },
    { address: "10.1.0.4:8080/TCP", portName: "http", state: "quarantined", zone: undefined },
    { address: "10.1.0.5:8080/TCP", portName: "http", state: "active", zone: undefined },
  ]);
  // An IPv6 slice's addresses become IPv6 backends (RFC 5952, bracketed); FQDN slices are skipped.
  deepStrictEqual(convertEndpointSlice({ ...slice, addressType: "IPv6" }), []);
  deepStrictEqual(
    convertEndpointSlice({
      ...slice,
      addressType: "IPv6",
      endpoints: [{ addresses: ["2001:DB8:2:0::3"], conditions: { ready: true } }, {
        addresses: ["10.1.0.9"],
      }],
    }),
    [{ address: "[2001:db8:2::3]:8080/TCP", portName: "http", state: "active", zone: undefined }],
  );
  deepStrictEqual(convertEndpointSlice({ ...slice, addressType: "FQDN" }), []);
  deepStrictEqual(sliceServiceName({ metadata: { name: "orphan" } }), undefined);
});

Deno.test("k8s convert: health-check annotations → the service's healthCheck", () => {
  const plain = convertService({ metadata: { name: "x" } });
  deepStrictEqual("healthCheck" in plain, false);
  const svc = convertService({
    metadata: {
      name: "x",
      annotations: {
        "holdfast.io/health-check": "http",
        "holdfast.io/health-check-path": "/healthz",
        "holdfast.io/health-check-port": "8081",
        "holdfast.io/health-check-interval-ms": "500",
        "holdfast.io/health-check-fall": "2",
      },
    },
  });
  deepStrictEqual(
    [svc.healthCheck?.kind, svc.healthCheck?.path, svc.healthCheck?.port, svc.healthCheck?.fall],
    ["http", "/healthz", 8081, 2],
  );
  deepStrictEqual([svc.healthCheck?.intervalMs, svc.healthCheck?.timeoutMs], [500, 500]);
  throws(
    () =>
      convertService({
        metadata: {
          name: "x",
          namespace: "n",
          annotations: {
            "holdfast.io/health-check": "tcp",
            "holdfast.io/health-check-rise": "-1",
          },
        },
      }),
    /Cannot convert service "n\/x": annotation holdfast\.io\/health-check-rise: "-1" is not an integer/,
  );
});
