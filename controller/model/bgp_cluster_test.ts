import { deepStrictEqual, throws } from "node:assert/strict";
import { checkClusterBgp, nodeBgpSettings } from "./bgp_cluster.ts";
import { BgpSettingsError } from "./bgp_settings.ts";

const BGP = {
  localAsn: 65100,
  prefixes: ["10.0.100.0/24"],
  communities: ["65000:100"],
  peers: [
    { address: "10.9.1.1", asn: 65000, bfd: { intervalMs: 100, multiplier: 3 } },
    { address: "10.9.2.1", asn: 65000, nodeSelector: { matchLabels: { rack: "r2" } } },
    { address: "10.9.1.300", asn: 65000 },
    {
      address: "10.9.3.1",
      asn: 65000,
      nodeSelector: { matchExpressions: [{ key: "x", operator: "Nope" }] },
    },
  ],
};

Deno.test("bgp cluster: a node gets the peers that select it, its router id, the cluster's ASN", () => {
  const r1 = nodeBgpSettings(BGP, { routerId: "10.9.1.2", labels: { rack: "r1" } });
  deepStrictEqual(r1.settings.peers.map((p) => p.address), ["10.9.1.1"]);
  deepStrictEqual(r1.settings.routerId, "10.9.1.2");
  deepStrictEqual(r1.settings.localAsn, 65100);
  deepStrictEqual(r1.settings.announce, "anycast");
  const r2 = nodeBgpSettings(BGP, { routerId: "10.9.2.2", labels: { rack: "r2" }, announce: "lb" });
  deepStrictEqual(r2.settings.peers.map((p) => p.address), ["10.9.1.1", "10.9.2.1"]);
  deepStrictEqual(r2.settings.announce, "lb");
});

Deno.test("bgp cluster: bad peers are named under spec.bgp and the rest stays", () => {
  const { error, peers } = checkClusterBgp(BGP);
  deepStrictEqual(error, undefined);
  deepStrictEqual(peers.map((p) => [p.peer, p.path]), [
    ["10.9.1.300", "spec.bgp.peers[2].address"],
    ["10.9.3.1", "spec.bgp.peers[3].nodeSelector"],
  ]);
});

Deno.test("bgp cluster: a bad cluster-wide field refuses the section", () => {
  deepStrictEqual(
    checkClusterBgp({ ...BGP, localAsn: 23456 }).error?.includes("spec.bgp.localAsn"),
    true,
  );
  deepStrictEqual(
    checkClusterBgp({ ...BGP, prefixes: [] }).error?.includes("spec.bgp.prefixes"),
    true,
  );
  throws(() => nodeBgpSettings("x", { routerId: "10.9.1.2", labels: {} }), BgpSettingsError);
});
