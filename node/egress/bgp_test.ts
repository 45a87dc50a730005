/**
 * BGP mode of the NAT pods, the parts that need no process: the config's `bgp` section (every
 * error names its field), `--announce`, the bird settings a pod derives. The bird watchdog:
 * tests/netns/egress_bgp_watchdog_test.ts.
 */
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { EgressConfigError, parseEgressConfig } from "../../controller/egress/config.ts";
import { egressBirdSettings } from "../../controller/egress/bgp_config.ts";
import { renderBirdConfig } from "../bgp/bird_config.ts";
import { parseCommandLine } from "../../lib/args.ts";
import { EGRESS_COMMAND, readEgressArgs } from "./egress_args.ts";

const BASE = {
  name: "default/egress",
  destinations: ["198.18.0.0/24"],
  addresses: [{ address: "198.18.0.100", gateway: "10.8.0.100" }],
  sources: [{ prefix: "10.8.0.11/32" }],
  peers: [{ name: "nat1", address: "10.8.0.21" }, { name: "nat2", address: "10.8.0.22" }],
};
const BGP = {
  localAsn: 65100,
  peers: [{ address: "198.18.0.1", asn: 65000, bfd: { intervalMs: 100, multiplier: 3 } }],
  communities: ["65000:100"],
};

function refused(bgp: unknown): EgressConfigError {
  try {
    parseEgressConfig({ ...BASE, bgp });
  } catch (err) {
    assert(err instanceof EgressConfigError, String(err));
    return err;
  }
  throw new Error(`accepted ${JSON.stringify(bgp)}`);
}

Deno.test("egress bgp config: accepted, and absent by default (a v1 document)", () => {
  assertEquals(parseEgressConfig(BASE).bgp, undefined);
  assert(!("bgp" in parseEgressConfig(BASE)), "a config without bgp must encode as v1 did");
  const c = parseEgressConfig({ ...BASE, bgp: BGP });
  assertEquals(c.bgp, BGP);
  assertEquals(parseEgressConfig({ ...BASE, bgp: { ...BGP, communities: undefined } }).bgp, {
    ...BGP,
    communities: [],
  });
});

Deno.test("egress bgp config: every error names its field", () => {
  const cases: [unknown, string][] = [
    ["yes", "bgp"],
    [{ ...BGP, localAsn: 0 }, "bgp.localAsn"],
    [{ ...BGP, localAsn: 23456 }, "bgp.localAsn"],
    [{ ...BGP, peers: [] }, "bgp.peers"],
    [{ ...BGP, peers: [{ address: "198.18.0.300", asn: 65000 }] }, "bgp.peers[0].address"],
    [{ ...BGP, peers: [{ address: "198.18.0.1", asn: -1 }] }, "bgp.peers[0].asn"],
    [{
      ...BGP,
      peers: [{ address: "198.18.0.1", asn: 65000, bfd: { intervalMs: 1, multiplier: 3 } }],
    }, "bgp.peers[0].bfd.intervalMs"],
    [{ ...BGP, peers: [BGP.peers[0], BGP.peers[0]] }, "bgp.peers[1].address"],
    [{ ...BGP, communities: ["65000"] }, "bgp.communities[0]"],
    [{ ...BGP, holdTime: 9 }, "bgp.holdTime"],
  ];
  for (const [bgp, field] of cases) {
    const err = refused(bgp);
    assertEquals(err.field, field, err.message);
    assert(err.message.startsWith(`field "${field}"`), err.message);
  }
});

Deno.test("egress bgp: a pod's bird settings announce only the floating host routes", () => {
  const c = parseEgressConfig({ ...BASE, bgp: BGP });
  const s = egressBirdSettings(c.bgp!, "10.8.0.21", c.addresses.map((a) => a.address));
  assertEquals(s.prefixes, ["198.18.0.100/32"]);
  assertEquals(s.announce, "lb");
  const conf = renderBirdConfig(s, { announced: ["198.18.0.100"] });
  assert(conf.includes("route 198.18.0.100/32 blackhole;"), conf);
  assert(conf.includes("198.18.0.100/32{32,32}"), conf);
  assert(conf.includes("bgp_community.add((65000, 100));"), conf);
  assert(conf.includes("neighbor 198.18.0.1 as 65000;"), conf);
  assert(conf.includes("router id 10.8.0.21;"), conf);
});

Deno.test("egress args: --announce garp|bgp|both|auto (default auto), --bgp-dir", () => {
  const read = (...extra: string[]) =>
    readEgressArgs(
      parseCommandLine(["--config", "e.json", "--name", "nat1", ...extra], EGRESS_COMMAND),
    );
  assertEquals(read().announce, "auto");
  assertEquals(read("--announce", "bgp", "--bgp-dir", "/run/b").announce, "bgp");
  assertEquals(read("--announce", "both").bgpDir, undefined);
  let message = "";
  try {
    read("--announce", "ospf");
  } catch (err) {
    message = (err as Error).message;
  }
  assert(message.includes("--announce") && message.includes("ospf"), message);
});
