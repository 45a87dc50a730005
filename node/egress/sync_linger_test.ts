import { deepStrictEqual } from "node:assert/strict";
import type { CtEntry } from "../conntrack/mod.ts";
import { plannedHandover, SyncLinger } from "./_sync_linger.ts";

const A = 0xc6120064, B = 0xc6120065;

function flow(i: number, addr: number, tcpState: number): CtEntry {
  const orig = {
    src: 0x0a08000b,
    dst: 0xc6120001,
    proto: 6 as const,
    sport: 40_000 + i,
    dport: 8080,
  };
  return {
    orig,
    reply: { src: orig.dst, dst: addr, proto: 6, sport: 8080, dport: 10_000 + i },
    status: 0x19e,
    timeoutS: 120,
    tcpState,
    natSrc: { addr, port: 10_000 + i },
  };
}

Deno.test("linger: forwards each state change of a lingering address once, never a destroy", () => {
  const l = new SyncLinger();
  l.keep(A, 1_000, 0);
  deepStrictEqual([l.forward("new", flow(1, A, 1)), l.forward("update", flow(1, A, 1))], [
    true,
    false,
  ]);
  deepStrictEqual(l.forward("update", flow(1, A, 3)), true); // SYN_SENT → ESTABLISHED
  deepStrictEqual(l.forward("destroy", flow(1, A, 3)), false);
  deepStrictEqual(l.forward("new", flow(2, B, 1)), false); // not lingering
  deepStrictEqual([...l.addressSet()], [A]);
});

Deno.test("linger: ends at its time or when the address is owned again", () => {
  const l = new SyncLinger();
  l.keep(A, 1_000, 0);
  l.keep(B, 2_000, 0);
  deepStrictEqual([l.expire(999), l.expire(1_000)], [false, true]);
  deepStrictEqual(l.addresses(), [B]);
  deepStrictEqual([l.drop(B), l.empty], [true, true]);
  l.keep(A, 1_000, 0);
  deepStrictEqual(l.forward("new", flow(1, A, 1)), true); // forgotten with the last linger
});

Deno.test("linger: only draining and rebalance forfeits are planned handovers", () => {
  deepStrictEqual(
    ["draining", "rebalance to nat2", "lease not renewed in time", "stopping", "agent stopped"]
      .map(plannedHandover),
    [true, true, false, false, false],
  );
});
