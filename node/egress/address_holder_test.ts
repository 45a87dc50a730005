import { deepStrictEqual, rejects } from "node:assert/strict";
import { AddressHolder, type AddressOps } from "./_address_holder.ts";

const A1 = "198.18.0.100";

/** Address ops whose every call waits until the test settles it; records the kernel side. */
class GatedOps implements AddressOps {
  readonly calls: string[] = [];
  readonly kernel = new Set<string>();
  readonly #pending: { op: string; settle: (err?: Error) => void }[] = [];

  add(addr: string, epoch: number): Promise<void> {
    return this.#gate(`add ${addr} ${epoch}`, () => this.kernel.add(addr));
  }

  remove(addr: string, why: string): Promise<void> {
    return this.#gate(`remove ${addr} ${why}`, () => this.kernel.delete(addr));
  }

  /** Operations started and not yet settled. */
  get pending(): string[] {
    return this.#pending.map((p) => p.op);
  }

  /** Settles the oldest pending operation (applying it to `kernel` unless `err`). */
  async settle(err?: Error): Promise<void> {
    const p = this.#pending.shift();
    if (!p) throw new Error("no operation pending");
    p.settle(err);
    for (let i = 0; i < 10; i++) await Promise.resolve(); // let the holder's worker go on
  }

  #gate(op: string, apply: () => void): Promise<void> {
    this.calls.push(op);
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    this.#pending.push({
      op,
      settle: (err) => {
        if (err) return reject(err);
        apply();
        resolve();
      },
    });
    return promise;
  }
}

function holder(): { h: AddressHolder; ops: GatedOps; changes: string[][] } {
  const ops = new GatedOps();
  const changes: string[][] = [];
  const h = new AddressHolder(ops, (owned) => changes.push([...owned]));
  return { h, ops, changes };
}

Deno.test("holder: a re-assume during a pending forfeit ends held and owned (issue 29)", async () => {
  const { h, ops, changes } = holder();
  const assumed = h.assume(A1, 1);
  await ops.settle();
  await assumed;
  deepStrictEqual([h.owned(), h.state(A1)], [[A1], "held"]);
  // The lease was renewed late: forfeit; the removal is still running when ownership re-assumes.
  const forfeited = h.forfeit(A1, "lease not renewed in time");
  deepStrictEqual(ops.pending, [`remove ${A1} lease not renewed in time`]);
  const reassumed = h.assume(A1, 1);
  deepStrictEqual(h.owned(), [A1]); // wanted at once: the sync sender follows it already
  deepStrictEqual(ops.pending.length, 1); // the add waits for the removal (one writer)
  await ops.settle(); // the removal finishes last in the old code, and wiped the re-assume
  await forfeited;
  deepStrictEqual(ops.pending, [`add ${A1} 1`]);
  await ops.settle();
  await reassumed;
  deepStrictEqual([h.owned(), h.state(A1), [...ops.kernel]], [[A1], "held", [A1]]);
  deepStrictEqual(changes, [[A1], [], [A1]]);
});

Deno.test("holder: a forfeit during a pending add removes after it; the kernel ends empty", async () => {
  const { h, ops } = holder();
  const assumed = h.assume(A1, 1);
  const forfeited = h.forfeit(A1, "lease lost");
  deepStrictEqual(h.owned(), []);
  deepStrictEqual(ops.pending, [`add ${A1} 1`]);
  await ops.settle();
  await assumed;
  deepStrictEqual(ops.pending, [`remove ${A1} lease lost`]);
  await ops.settle();
  await forfeited;
  deepStrictEqual([h.owned(), h.state(A1), [...ops.kernel]], [[], "released", []]);
});

Deno.test("holder: every interleaving of forfeit and assume ends as the last call asked", async () => {
  // Sequences of calls, each settling some of the pending operations in between.
  for (let mask = 0; mask < 2 ** 8; mask++) {
    const { h, ops } = holder();
    let want = false;
    const all: Promise<void>[] = [];
    for (let step = 0; step < 8; step++) {
      if (mask & (1 << step)) {
        want = !want;
        all.push(want ? h.assume(A1, step) : h.forfeit(A1, `step ${step}`));
        deepStrictEqual(h.owned(), want ? [A1] : []);
      } else if (ops.pending.length > 0) await ops.settle();
    }
    for (let i = 0; i < 20 && ops.pending.length > 0; i++) await ops.settle();
    await Promise.all(all);
    deepStrictEqual(ops.pending, []);
    deepStrictEqual([...ops.kernel], want ? [A1] : [], `mask ${mask}: ${ops.calls.join("; ")}`);
    deepStrictEqual(h.state(A1), want ? "held" : "released");
  }
});

Deno.test("holder: a failed removal rejects the forfeit; the next forfeit removes again", async () => {
  const { h, ops } = holder();
  const assumed = h.assume(A1, 1);
  await ops.settle();
  await assumed;
  const first = h.forfeit(A1, "lease lost");
  await ops.settle(new Error("ip failed"));
  await rejects(() => first, /ip failed/);
  deepStrictEqual([h.owned(), h.state(A1), h.notReleased()], [[], "held", [A1]]);
  const again = h.forfeit(A1, "agent stopped");
  await ops.settle();
  await again;
  deepStrictEqual([h.state(A1), [...ops.kernel]], ["released", []]);
});
