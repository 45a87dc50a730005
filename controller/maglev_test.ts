import { assertEquals } from "./testing.ts";
import { referenceMaglev } from "./maglev.ts";

interface Vector {
  name: string;
  m: number;
  backends: { key: string; weight: number }[];
  sha256: string;
  slots: Record<string, number>;
}

Deno.test("maglev reference builds the policy module's golden tables", async () => {
  const text = await Deno.readTextFile(
    new URL("../policy-as/vectors/maglev.json", import.meta.url),
  );
  const { vectors } = JSON.parse(text) as { vectors: Vector[] };
  for (const v of vectors) {
    const t = referenceMaglev.build(v.backends, v.m);
    for (const [slot, want] of Object.entries(v.slots)) {
      assertEquals(t[Number(slot)], want, `${v.name} slot ${slot}`);
    }
    const digest = new Uint8Array(
      await crypto.subtle.digest("SHA-256", new Uint8Array(t.buffer as ArrayBuffer)),
    );
    assertEquals(
      [...digest].map((b) => b.toString(16).padStart(2, "0")).join(""),
      v.sha256,
      v.name,
    );
  }
});

Deno.test("maglev reference: order-independent, balanced, weighted", () => {
  const bs = Array.from({ length: 10 }, (_, i) => ({ key: `10.1.0.${i}:8080`, weight: 1 }));
  const a = referenceMaglev.build(bs, 1021);
  const b = referenceMaglev.build([...bs].reverse(), 1021);
  // Same owners whatever the input order (indices differ, keys don't).
  assertEquals([...a].map((x) => bs[x - 1]!.key), [...b].map((x) => [...bs].reverse()[x - 1]!.key));
  const counts = new Map<number, number>();
  for (const x of a) counts.set(x, (counts.get(x) ?? 0) + 1);
  for (const c of counts.values()) assertEquals(c >= 100 && c <= 105, true, `count ${c}`);
  const w = referenceMaglev.build([{ key: "a", weight: 1 }, { key: "b", weight: 3 }], 1021);
  const nb = [...w].filter((x) => x === 2).length;
  assertEquals(nb > 700 && nb < 830, true, `weighted share ${nb}`);
});
