/**
 * The feed applies the LoadBalancerConfig's per-Service defaults (a Service's own annotations
 * win) and feeds a Service only the EndpointSlices of the families it has addresses of.
 */
import { deepStrictEqual } from "node:assert/strict";
import { captureLogs, log } from "../../lib/log.ts";
import { convertService, type K8sService } from "../../node/lb/sources/k8s_convert.ts";
import type { K8sEvent } from "../../node/lb/sources/k8s_source.ts";
import { readConfig } from "./_config.ts";
import { SourceFeed } from "./_feed.ts";
import type { KubeObject } from "./objects.ts";

function svc(name: string, annotations: Record<string, string> = {}): KubeObject {
  return {
    metadata: { name, namespace: "shop", annotations },
    spec: { type: "LoadBalancer", loadBalancerClass: "holdfast.io/lb", ports: [{ port: 80 }] },
  };
}

Deno.test("config defaults: flowKey and maglevTableSize apply unless the Service sets its own", () => {
  using _logs = captureLogs();
  const events: K8sEvent[] = [];
  const feed = new SourceFeed({ apply: (e) => events.push(...e) }, log);
  const cfg = readConfig([{
    metadata: { name: "default", generation: 1 },
    spec: { flowKey: "ClientIP", maglevTableSize: 251 },
  }]);
  deepStrictEqual(cfg.ready?.status, "True");
  feed.sync(
    [
      { object: svc("plain"), addresses: ["10.0.100.1"] },
      {
        object: svc("own", {
          "holdfast.io/flow-key": "five-tuple",
          "holdfast.io/maglev-size": "1021",
        }),
        addresses: ["10.0.100.2"],
      },
    ],
    [],
    cfg.defaults,
  );
  const inputs = new Map(
    events.map((e) => convertService(e.object as K8sService)).map((s) => [s.name, s]),
  );
  deepStrictEqual(inputs.get("shop/plain")?.flowKeyMode, "client-ip");
  deepStrictEqual(inputs.get("shop/plain")?.maglevSize, 251);
  deepStrictEqual(inputs.get("shop/own")?.flowKeyMode, "five-tuple");
  deepStrictEqual(inputs.get("shop/own")?.maglevSize, 1021);

  // An invalid size is reported on the config and not applied.
  const bad = readConfig([{ metadata: { name: "default" }, spec: { maglevTableSize: 1000 } }]);
  deepStrictEqual(bad.ready?.status, "False");
  deepStrictEqual(bad.defaults.maglevSize, undefined);
});

Deno.test("feed: a family's frontend takes its family's slices; an IPv6 slice waits for the IPv6 address", () => {
  using _logs = captureLogs();
  const events: K8sEvent[] = [];
  const feed = new SourceFeed({ apply: (e) => events.push(...e) }, log);
  const slice = (family: string, ip: string): KubeObject => ({
    metadata: {
      name: `web-${family}`,
      namespace: "shop",
      resourceVersion: "1",
      labels: { "kubernetes.io/service-name": "web" },
    },
    addressType: family,
    ports: [{ port: 8080 }],
    endpoints: [{ addresses: [ip] }],
  });
  const slices = [slice("IPv4", "10.1.0.1"), slice("IPv6", "2001:db8:2::1")];
  const fed = () =>
    events.splice(0).map((e) => `${e.type} ${(e.object as KubeObject).metadata?.name}`);
  // PreferDualStack with only its IPv4 address: the IPv6 slice is held back.
  feed.sync([{ object: svc("web"), addresses: ["10.0.100.1"] }], slices);
  deepStrictEqual(fed(), ["add web", "add web-IPv4"]);
  feed.sync([{ object: svc("web"), addresses: ["10.0.100.1", "2001:db8:100::1"] }], slices);
  deepStrictEqual(fed(), ["update web", "add web-IPv6"]);
  // Back to IPv4 only: the IPv6 slice's backends go with the IPv6 frontend.
  feed.sync([{ object: svc("web"), addresses: ["10.0.100.1"] }], slices);
  deepStrictEqual(fed(), ["update web", "delete web-IPv6"]);
  // No address yet: every slice is fed (backends may come before frontends).
  const fresh = new SourceFeed({ apply: (e) => events.push(...e) }, log);
  fresh.sync([{ object: svc("web"), addresses: [] }], slices);
  deepStrictEqual(fed(), ["add web", "add web-IPv4", "add web-IPv6"]);
});
