import { deepStrictEqual, ok, throws } from "node:assert/strict";
import { captureLogs, log } from "../../lib/log.ts";
import { Registry } from "../../lib/metrics.ts";
import {
  BgpSettingsError,
  parseBgpSettings,
  parseBgpSettingsText,
  peerProtocolName,
  renderBirdConfig,
  reportBgpProblems,
} from "./mod.ts";

/** A `throws` check: a BgpSettingsError whose message contains `part`. */
const bgpSettingsError = (part: string) => (e: unknown) =>
  e instanceof BgpSettingsError && e.message.includes(part);

const BASE = { routerId: "10.9.1.2", localAsn: 65101, prefixes: ["10.0.100.0/24"] };

Deno.test("bgp settings: a bad peer is dropped and named, the good ones stay", () => {
  const { settings, problems } = parseBgpSettings({
    ...BASE,
    peers: [
      { address: "10.9.1.1", asn: 65000, bfd: { intervalMs: 100, multiplier: 3 } },
      { address: "10.9.1.300", asn: 65000 },
      { address: "10.9.2.1", asn: 4294967295 },
      { address: "10.9.3.1", asn: 23456 },
      { address: "10.9.4.1", asn: 65000, bfd: { intervalMs: 1, multiplier: 3 } },
      { address: "10.9.5.1", asn: 65000, password: 'a"b' },
      { address: "10.9.1.1", asn: 65001 },
      { address: "10.9.1.2", asn: 65001 },
      "nonsense",
      { address: "10.9.6.1", asn: 65000, bfd: true, password: "s3cret" },
    ],
  });
  ok(
    JSON.stringify(settings.peers.map((p) => p.address)) === '["10.9.1.1","10.9.6.1"]',
    JSON.stringify(settings.peers),
  );
  ok(settings.peers[1]?.bfd?.intervalMs === 100, "bfd: true is 100 ms × 3");
  const named = problems.map((p) => `${p.path} ${p.message}`);
  ok(problems.length === 8, JSON.stringify(named));
  for (
    const part of [
      '$.peers[1].address peer "10.9.1.300"',
      '$.peers[2].asn peer "10.9.2.1": AS number 4294967295',
      "AS_TRANS",
      "BFD interval 1 ms",
      "$.peers[5].password",
      "listed twice",
      "own router id",
      "$.peers[8]",
    ]
  ) ok(named.some((n) => n.includes(part)), `no problem says "${part}": ${named}`);
});

Deno.test("bgp settings: node-wide errors refuse the whole config, naming the setting", () => {
  throws(() => parseBgpSettings({ ...BASE, routerId: "x" }), bgpSettingsError("$.routerId"));
  throws(() => parseBgpSettings({ ...BASE, localAsn: 0 }), bgpSettingsError("$.localAsn"));
  throws(() => parseBgpSettings({ ...BASE, prefixes: [] }), bgpSettingsError("$.prefixes"));
  throws(
    () => parseBgpSettings({ ...BASE, prefixes: ["10.0.100.1/24"] }),
    bgpSettingsError("$.prefixes[0]"),
  );
  throws(
    () => parseBgpSettings({ ...BASE, communities: ["65536:1"] }),
    bgpSettingsError("$.communities[0]"),
  );
  throws(() => parseBgpSettings({ ...BASE, announce: "both" }), bgpSettingsError("$.announce"));
  throws(
    () => parseBgpSettingsText("routerId: [unclosed"),
    bgpSettingsError("Cannot parse BGP settings"),
  );
});

Deno.test("bird config: peers, BFD, password, communities and the prefix gate", () => {
  const { settings } = parseBgpSettingsText(`
routerId: 10.9.1.2
localAsn: 65101
prefixes: [10.0.100.0/24, 10.0.200.0/28]
communities: ["65000:100", "65000:1:2"]
peers:
  - { address: 10.9.1.1, asn: 65000, bfd: { intervalMs: 100, multiplier: 3 }, password: s3cret }
  - { address: 10.9.9.1, asn: 65009 }
`);
  const conf = renderBirdConfig(settings, { logFile: "/tmp/x/bird.log" });
  for (
    const want of [
      "router id 10.9.1.2;",
      'log "/tmp/x/bird.log" all;',
      'protocol direct hf_lo { ipv4; interface "lo"; }',
      "if net ~ [ 10.0.100.0/24{32,32}, 10.0.200.0/28{32,32} ] then {",
      "bgp_community.add((65000, 100));",
      "bgp_large_community.add((65000, 1, 2));",
      "protocol bfd hf_bfd { }",
      "protocol bgp hf_peer_10_9_1_1 {",
      "local as 65101;",
      "neighbor 10.9.1.1 as 65000;",
      'password "s3cret";',
      "bfd { min rx interval 100 ms; min tx interval 100 ms; multiplier 3; };",
      "ipv4 { import none; export filter hf_export; };",
      "neighbor 10.9.9.1 as 65009;",
    ]
  ) ok(conf.includes(want), `config lacks ${JSON.stringify(want)}:\n${conf}`);
  // The second peer has no BFD block and no password.
  const second = conf.slice(conf.indexOf("protocol bgp hf_peer_10_9_9_1"));
  ok(!second.includes("bfd {") && !second.includes("password"), second);
  ok(peerProtocolName({ address: "10.9.9.1" }) === "hf_peer_10_9_9_1", "protocol name");
});

Deno.test("bird config: without BFD peers there is no bfd protocol; no peers is valid", () => {
  const { settings } = parseBgpSettings({ ...BASE, peers: [] });
  const conf = renderBirdConfig(settings);
  ok(!conf.includes("protocol bfd") && !conf.includes("protocol bgp"), conf);
  ok(conf.includes("log stderr"), conf);
});

Deno.test("bird config, announce lb: static routes for the announced addresses, lo not watched", () => {
  const { settings } = parseBgpSettings({ ...BASE, announce: "lb", peers: [] });
  const conf = renderBirdConfig(settings, { announced: ["10.0.100.1", "10.0.100.2"] });
  ok(!conf.includes("protocol direct"), conf);
  ok(conf.includes("route 10.0.100.1/32 blackhole;"), conf);
  ok(conf.includes("route 10.0.100.2/32 blackhole;"), conf);
  const none = renderBirdConfig(settings);
  ok(none.includes("protocol static hf_lb {") && !none.includes("route "), none);
});

Deno.test("bgp: refused peers are logged by name and counted in holdfast_bgp_peers_refused", () => {
  using logs = captureLogs();
  const { problems } = parseBgpSettings({
    ...BASE,
    peers: [{ address: "10.9.1.1", asn: 65000 }, { address: "bad", asn: 65000 }],
  });
  const registry = new Registry();
  reportBgpProblems(problems, log, registry);
  const line = logs.records.find((r) => r.msg.startsWith("BGP peer refused"));
  ok(line?.peer === "bad" && line.path === "$.peers[1].address", JSON.stringify(line));
  ok(registry.expose().includes("holdfast_bgp_peers_refused 1"), registry.expose());
});

Deno.test("bgp settings: IPv6 peers and prefixes are accepted (RFC 5952 form), bad ones named", () => {
  const { settings, problems } = parseBgpSettings({
    ...BASE,
    prefixes: ["10.0.100.0/24", "2001:db8:100::/48"],
    peers: [
      { address: "2001:DB8:9:1:0::1", asn: 65000 },
      { address: "2001:db8:9:1::1", asn: 65001 },
      { address: "2001:db8::g", asn: 65000 },
    ],
  });
  deepStrictEqual(settings.peers.map((p) => p.address), ["2001:db8:9:1::1"]);
  deepStrictEqual(problems.map((p) => p.path), ["$.peers[1].address", "$.peers[2].address"]);
  ok(problems[0]!.message.includes("listed twice"), problems[0]!.message);
  throws(
    () => parseBgpSettings({ ...BASE, prefixes: ["2001:db8:100::1/48"] }),
    bgpSettingsError("$.prefixes[0]"),
  );
});

Deno.test("bird config, dual stack: an IPv6 session per IPv6 peer, /128s gated by hf_export6", () => {
  const { settings } = parseBgpSettings({
    ...BASE,
    announce: "lb",
    prefixes: ["10.0.100.0/24", "2001:db8:100::/48"],
    communities: ["65000:100"],
    peers: [
      { address: "10.9.1.1", asn: 65000, bfd: true },
      { address: "2001:db8:9:1::1", asn: 65000, bfd: true },
    ],
  });
  const conf = renderBirdConfig(settings, { announced: ["10.0.100.1", "2001:db8:100::1"] });
  for (
    const want of [
      "protocol static hf_lb {\n  ipv4;\n  route 10.0.100.1/32 blackhole;\n}",
      "protocol static hf_lb6 {\n  ipv6;\n  route 2001:db8:100::1/128 blackhole;\n}",
      "filter hf_export {\n  if net ~ [ 10.0.100.0/24{32,32} ] then {",
      "filter hf_export6 {\n  if net ~ [ 2001:db8:100::/48{128,128} ] then {\n" +
      "    bgp_community.add((65000, 100));",
      "protocol bgp hf_peer_2001_db8_9_1__1 {",
      "neighbor 2001:db8:9:1::1 as 65000;",
      "ipv6 { import none; export filter hf_export6; };",
    ]
  ) ok(conf.includes(want), `config lacks ${JSON.stringify(want)}:\n${conf}`);
  const v4peer = conf.slice(conf.indexOf("protocol bgp hf_peer_10_9_1_1"));
  ok(v4peer.slice(0, v4peer.indexOf("}\n")).includes("ipv4 { import none;"), v4peer);
  ok(!v4peer.slice(0, v4peer.indexOf("\n}\n")).includes("ipv6"), "no MP-BGP on the v4 one");
  // IPv6 peers only, no IPv6 prefix: the v6 filter rejects everything (nothing leaks).
  const noV6 = renderBirdConfig(
    parseBgpSettings({ ...BASE, peers: [{ address: "2001:db8:9:1::1", asn: 65000 }] }).settings,
  );
  ok(noV6.includes("filter hf_export6 {\n  reject;\n}"), noV6);
  ok(noV6.includes('protocol direct hf_lo6 { ipv6; interface "lo"; }'), noV6);
  // IPv6 prefixes only: the v4 filter rejects everything.
  const only6 = renderBirdConfig(
    parseBgpSettings({ ...BASE, prefixes: ["2001:db8::/32"] }).settings,
  );
  ok(only6.includes("filter hf_export {\n  reject;\n}"), only6);
});

Deno.test("bird config: an IPv4-only config has no IPv6 part; a bad announced address throws", () => {
  const { settings } = parseBgpSettings({ ...BASE, announce: "lb", peers: [] });
  const conf = renderBirdConfig(settings, { announced: ["10.0.100.1"] });
  ok(!conf.includes("ipv6") && !conf.includes("hf_export6"), conf);
  let threw = "";
  try {
    renderBirdConfig(settings, { announced: ["2001:db8::x"] });
  } catch (e) {
    threw = (e as Error).message;
  }
  ok(threw.includes('"2001:db8::x"') && threw.includes("IPv4 or IPv6"), threw);
});
