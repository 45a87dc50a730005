import { deepStrictEqual, ok, throws } from "node:assert/strict";
import { EgressConfigError, parseEgressConfig, selfPeer } from "../../controller/egress/config.ts";
import { egressRuleset } from "./nft.ts";
import { readEgressArgs } from "./egress_args.ts";
import { parseCommandLine } from "../../lib/args.ts";
import { EGRESS_COMMAND } from "./egress_args.ts";

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
  deepStrictEqual(c.sources.map((s) => s.address), [
    "198.18.0.100",
    "198.18.0.101",
    "198.18.0.100",
  ]);
  deepStrictEqual(c.healthCheck, { intervalMs: 100, multiplier: 3 });
  deepStrictEqual(c.interfaces, { internal: "int0", external: "ext0" });
  deepStrictEqual(c.sync, true);
  deepStrictEqual(selfPeer(c, "nat2").address, "10.8.0.22");
  throws(
    () => selfPeer(c, "nat9"),
    (e: unknown) => e instanceof EgressConfigError && e.message.includes('"nat9" is not among'),
  );
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
    throws(
      () => parseEgressConfig(doc),
      (err: unknown) =>
        err instanceof EgressConfigError && err.field === field &&
        err.message.includes(`field "${field}"`),
    );
  }
});

Deno.test("egress rules: one SNAT rule per source, port range only with tcp/udp", () => {
  const text = egressRuleset(parseEgressConfig({ ...BASE, snatPorts: "10000-29999" }));
  ok(text.startsWith("table ip holdfast_egress {}\ndelete table ip holdfast_egress\n"));
  ok(text.includes(
    'ip saddr 10.8.0.12/32 ip daddr @destinations oifname "ext0" meta l4proto { tcp, udp } ' +
      "snat to 198.18.0.101:10000-29999",
  ));
  ok(
    text.includes(
      'ip saddr 10.8.0.12/32 ip daddr @destinations oifname "ext0" snat to 198.18.0.101\n',
    ),
  );
  deepStrictEqual(text.match(/snat to/g)?.length, 6);
});

Deno.test("egress args: required flags and one-line errors", () => {
  const parse = (args: string[]) => readEgressArgs(parseCommandLine(args, EGRESS_COMMAND));
  const a = parse(["--config", "e.json", "--name", "nat1", "--metrics-addr", "10.8.0.21:9470"]);
  deepStrictEqual(a.metrics, { hostname: "10.8.0.21", port: 9470 });
  deepStrictEqual(a.noSync, false);
  throws(
    () => parse(["--config", "e.json"]),
    (e: unknown) => e instanceof Error && e.message.includes('"--node-name"'),
  );
  throws(
    () => parse(["--config", "e", "--node-name", "n", "--listen", "x"]),
    (e: unknown) => e instanceof Error && e.message.includes('--listen "x"'),
  );
  // The new names: the shared groups' (lib/flag_groups.ts); the old ones above still work.
  const b = parse(["--config", "e.json", "--node-name", "nat1", "--listen", "10.8.0.21:9470"]);
  deepStrictEqual([b.name, b.metrics], ["nat1", { hostname: "10.8.0.21", port: 9470 }]);
  throws(
    () => parse(["--config", "e", "--name", "n", "--node-name", "m"]),
    /Cannot use --name with --node-name: it is its old name/,
  );
});
