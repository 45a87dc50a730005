import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { EgressConfigError, parseEgressConfig, selfPeer } from "../../controller/egress/config.ts";
import { egressRuleset } from "./nft.ts";
import { readEgressArgs } from "./egress_args.ts";
import { parseCommandLine } from "../../lib/args.ts";
import { EGRESS_COMMAND } from "./egress_args.ts";

function assertThrows<E extends Error>(
  fn: () => unknown,
  kind: new (...a: never[]) => E,
  includes = "",
): E {
  try {
    fn();
  } catch (err) {
    assert(err instanceof kind, `expected ${kind.name}, got ${err}`);
    assert(err.message.includes(includes), `${JSON.stringify(err.message)} lacks ${includes}`);
    return err;
  }
  throw new Error(`expected ${kind.name}: nothing thrown`);
}

const BASE = {
  name: "default/egress",
  destinations: ["198.18.0.0/24"],
  addresses: [
    { address: "198.18.0.100", gateway: "10.8.0.100" },
    { address: "198.18.0.101", gateway: "10.8.0.101" },
  ],
  sources: [{ prefix: "10.8.0.11/32" }, { prefix: "10.8.0.12/32" }, { prefix: "10.8.0.13/32" }],
  peers: [{ name: "nat1", address: "10.8.0.21" }, { name: "nat2", address: "10.8.0.22" }],
};

Deno.test("egress config: defaults, and sources pinned i mod N", () => {
  const c = parseEgressConfig(BASE);
  assertEquals(c.sources.map((s) => s.address), ["198.18.0.100", "198.18.0.101", "198.18.0.100"]);
  assertEquals(c.healthCheck, { intervalMs: 100, multiplier: 3 });
  assertEquals(c.interfaces, { internal: "int0", external: "ext0" });
  assertEquals(c.sync, true);
  assertEquals(selfPeer(c, "nat2").address, "10.8.0.22");
  assertThrows(() => selfPeer(c, "nat9"), EgressConfigError, '"nat9" is not among');
});

Deno.test("egress config: errors name the field and the value", () => {
  const cases: [Record<string, unknown>, string][] = [
    [
      { ...BASE, addresses: [{ address: "198.18.0.100", gateway: "10.8.0.x" }] },
      "addresses[0].gateway",
    ],
    [{ ...BASE, destinations: ["198.18.0.5/24"] }, "destinations[0]"],
    [{ ...BASE, sources: [{ prefix: "10.8.0.11/32", address: "1.2.3.4" }] }, "sources[0].address"],
    [{ ...BASE, peers: [BASE.peers[0], BASE.peers[0]] }, "peers.name[1]"],
    [{ ...BASE, healthCheck: { intervalMs: 5 } }, "healthCheck.intervalMs"],
    [{ ...BASE, snatPorts: "30000-2000" }, "snatPorts"],
    [{ ...BASE, sync: "yes" }, "sync"],
    [{ ...BASE, extra: 1 }, "extra"],
    [{ ...BASE, name: undefined }, "name"],
  ];
  for (const [doc, field] of cases) {
    const err = assertThrows(() => parseEgressConfig(doc), EgressConfigError);
    assertEquals(err.field, field, err.message);
    assert(err.message.includes(`field "${field}"`), err.message);
  }
});

Deno.test("egress rules: one SNAT rule per source, port range only with tcp/udp", () => {
  const text = egressRuleset(parseEgressConfig({ ...BASE, snatPorts: "10000-29999" }));
  assert(text.startsWith("table ip holdfast_egress {}\ndelete table ip holdfast_egress\n"));
  assert(text.includes(
    'ip saddr 10.8.0.12/32 ip daddr @destinations oifname "ext0" meta l4proto { tcp, udp } ' +
      "snat to 198.18.0.101:10000-29999",
  ));
  assert(
    text.includes(
      'ip saddr 10.8.0.12/32 ip daddr @destinations oifname "ext0" snat to 198.18.0.101\n',
    ),
  );
  assertEquals(text.match(/snat to/g)?.length, 6);
});

Deno.test("egress args: required flags and one-line errors", () => {
  const parse = (args: string[]) => readEgressArgs(parseCommandLine(args, EGRESS_COMMAND));
  const a = parse(["--config", "e.json", "--name", "nat1", "--metrics-addr", "10.8.0.21:9470"]);
  assertEquals(a.metrics, { hostname: "10.8.0.21", port: 9470 });
  assertEquals(a.noSync, false);
  assertThrows(() => parse(["--config", "e.json"]), Error, '"--name"');
  assertThrows(
    () => parse(["--config", "e", "--name", "n", "--metrics-addr", "x"]),
    Error,
    "--metrics-addr",
  );
});
