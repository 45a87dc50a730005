import { strictEqual, throws } from "node:assert/strict";
import { natSrcFilter } from "./_event_filter.ts";

Deno.test("event filter: two instructions per address after a fixed head, ending in drop", () => {
  const prog = natSrcFilter(new Set([0xc6120064, 0xc6120065]));
  const view = new DataView(prog.buffer);
  const n = prog.length / 8;
  strictEqual(n, 15 + 2 * 2 + 1);
  strictEqual(view.getUint32((n - 1) * 8 + 4, true), 0, "last instruction drops");
  strictEqual(view.getUint32(15 * 8 + 4, true), 0xc6120064);
  for (let i = 0; i < n; i++) {
    const jt = view.getUint8(i * 8 + 2), jf = view.getUint8(i * 8 + 3);
    strictEqual(jt <= 1 && jf <= 1, true, `instruction ${i} jumps only over the next one`);
  }
});

Deno.test("event filter: past classic BPF's 4,096 instructions is a RangeError naming the count", () => {
  natSrcFilter(new Set(Array.from({ length: 2_000 }, (_, i) => i)));
  throws(
    () => natSrcFilter(new Set(Array.from({ length: 2_100 }, (_, i) => i))),
    /2100 NAT addresses/,
  );
});
