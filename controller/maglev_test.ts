import { assertEquals } from "./_testing.ts";
import { murmur3, referenceMaglev } from "./maglev.ts";

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

Deno.test("murmur3: ASCII fast path and UTF-8 path give the reference hashes", () => {
  // Values from the previous (single-path) implementation, seed 0x686f6c64.
  const want: [string, number][] = [
    ["", 2121787616],
    ["a", 4104272448],
    ["ab", 2678437359],
    ["abc", 2909189253],
    ["abcd", 2299212356],
    ["10.1.0.1:8080", 881161541],
    ["héllo", 1563062306],
    ["日本:80", 3132505402],
    ["172.16.0.255:8080x", 2797393561],
    ["ü", 4247076265],
  ];
  for (const [k, h] of want) assertEquals(murmur3(k, 0x686f6c64), h, k);
});
