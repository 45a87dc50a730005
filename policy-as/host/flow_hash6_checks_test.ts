import { strictEqual } from "node:assert/strict";
import { allExportsTrapping, handMadeWasm, readBuiltWasm } from "./_testing.ts";
import { flowHash6ClientIp, flowHash6FiveTuple } from "./flow_hash.ts";
import { flowHash6ExportsProblem } from "./flow_hash6_checks.ts";
import { PolicyHost } from "./policy_host.ts";
import { PolicyModule, PolicyRejectedError, type RejectReason } from "./policy_module.ts";
import { validatePolicyModule } from "./validate.ts";
import { loadFlowHash6Vectors, loadVectors } from "./vectors.ts";
import { Registry } from "../../lib/metrics.ts";
import { ipv6Words } from "../../lib/ipv6.ts";

const vectors = await loadVectors();
const vectors6 = await loadFlowHash6Vectors();

async function rejection(run: () => Promise<unknown>): Promise<PolicyRejectedError> {
  try {
    await run();
  } catch (e) {
    if (e instanceof PolicyRejectedError) return e;
    throw e;
  }
  throw new Error("accepted; expected a rejection");
}

function expectReason(e: PolicyRejectedError, reason: RejectReason, fragment: string): void {
  if (e.reason !== reason || !e.message.includes(fragment)) {
    throw new Error(`expected ${reason} with "${fragment}", got ${e.reason}: ${e.message}`);
  }
}

Deno.test("release and debug builds: their IPv6 flow hash matches every flow_hash6.json vector", async () => {
  for (const target of ["release", "debug"]) {
    const { module, report } = await validatePolicyModule(await readBuiltWasm(target), vectors);
    strictEqual(module.hasFlowHash6, true, target);
    strictEqual(report.flowHash6Vectors, vectors6.length, target);
    const v = vectors6[5]!;
    const tuple = { ...v, saddr: ipv6Words(v.saddr), daddr: ipv6Words(v.daddr) };
    strictEqual(module.flowHash6FiveTuple(tuple, v.seed), v.five_tuple);
    strictEqual(module.flowHash6ClientIp(tuple.saddr, v.seed), v.client_ip);
  }
});

Deno.test("a module whose IPv6 hash packs the ports the other way round is rejected naming a vector", async () => {
  const wrong = await readBuiltWasm("fixtures/wrong_hash6");
  const e = await rejection(() => validatePolicyModule(wrong, vectors));
  expectReason(e, "vectors", "IPv6 five-tuple flow hash of [2001:db8::1]:40000");
  const tampered = structuredClone(vectors6);
  tampered[7]!.client_ip ^= 1;
  const t = await rejection(async () =>
    validatePolicyModule(await readBuiltWasm("release"), vectors, { flowHash6Vectors: tampered })
  );
  expectReason(t, "vectors", "IPv6 client-ip flow hash");
});

/**
 * `bytes` with the exports `names` renamed (first letter → "x", same length, so every section
 * size holds): a module built before IPv6 as far as the host can tell.
 */
function renameExports(bytes: Uint8Array, names: readonly string[]): Uint8Array {
  const out = bytes.slice();
  for (const name of names) {
    const needle = [name.length, ...new TextEncoder().encode(name)];
    const at = out.findIndex((_, i) => needle.every((b, j) => out[i + j] === b));
    if (at < 0) throw new Error(`no export "${name}" in the module`);
    out[at + 1] = "x".charCodeAt(0);
  }
  return out;
}

Deno.test("a module without the IPv6 exports stays valid; the TypeScript reference answers for it", async () => {
  const old = renameExports(await readBuiltWasm("release"), [
    "flow_hash6_5tuple",
    "flow_hash6_client_ip",
  ]);
  const { module, report } = await validatePolicyModule(old, vectors, {
    flowHash6Vectors: [], // not read: the module has no IPv6 hash to hold to them
  });
  strictEqual([module.hasFlowHash6, report.flowHash6Vectors].join(), "false,0");
  for (const v of vectors6) {
    const tuple = { ...v, saddr: ipv6Words(v.saddr), daddr: ipv6Words(v.daddr) };
    strictEqual(module.flowHash6FiveTuple(tuple, v.seed), flowHash6FiveTuple(tuple, v.seed));
    strictEqual(module.flowHash6FiveTuple(tuple, v.seed), v.five_tuple);
    strictEqual(
      module.flowHash6ClientIp(tuple.saddr, v.seed),
      flowHash6ClientIp(tuple.saddr, v.seed),
    );
  }
});

Deno.test("the IPv6 exports come both or neither, as functions", async () => {
  const only = handMadeWasm({
    functions: { ...allExportsTrapping(), flow_hash6_5tuple: 0 },
    memoryPages: 1,
  });
  expectReason(
    await rejection(() => PolicyModule.load(only)),
    "exports",
    'exports "flow_hash6_5tuple" without "flow_hash6_client_ip"',
  );
  const kinds = (entries: Array<[string, string]>) => flowHash6ExportsProblem(new Map(entries));
  strictEqual(kinds([["flow_hash_5tuple", "function"]]), null);
  strictEqual(
    kinds([["flow_hash6_5tuple", "function"], ["flow_hash6_client_ip", "function"]]),
    null,
  );
  strictEqual(
    kinds([["flow_hash6_5tuple", "global"], ["flow_hash6_client_ip", "function"]]),
    'export "flow_hash6_5tuple" is a global, expected a function',
  );
});

Deno.test("an IPv6 hash that never returns is stopped in the pre-flight worker", async () => {
  const fns = Object.fromEntries(Object.keys(allExportsTrapping()).map((k) => [k, 0]));
  const bytes = handMadeWasm({
    functions: { ...fns, abi_version: 1, flow_hash6_5tuple: "hang", flow_hash6_client_ip: 0 },
    memoryPages: 1,
  });
  const e = await rejection(() =>
    validatePolicyModule(bytes, vectors, { preflightDeadlineMs: 300 })
  );
  expectReason(e, "time-budget", "within 300 ms (runaway loop?)");
});

Deno.test("a policy host swap holds the IPv6 hash too and serves it", async () => {
  const host = await PolicyHost.create({ vectors, registry: new Registry() });
  const bad = await host.swap(await readBuiltWasm("fixtures/wrong_hash6"));
  strictEqual(bad.ok, false);
  const good = await host.swap(await readBuiltWasm("release"));
  strictEqual(good.ok && good.report.flowHash6Vectors, vectors6.length);
  const v = vectors6[0]!;
  strictEqual(host.current.flowHash6ClientIp(ipv6Words(v.saddr), v.seed), v.client_ip);
});
