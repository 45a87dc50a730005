import { backendKeyHashes, KEY_SEED_OFFSET, murmur3_32, murmur3String } from "./key_hash.ts";

Deno.test("murmur3_32 matches the published reference values", () => {
  const enc = new TextEncoder();
  const cases: Array<[string, number, number]> = [
    ["", 0, 0],
    ["", 1, 0x514e28b7],
    ["hello", 0, 0x248bfa47],
    ["The quick brown fox jumps over the lazy dog", 0, 0x2e4ff723],
  ];
  for (const [text, seed, want] of cases) {
    const got = murmur3_32(enc.encode(text), seed);
    if (got !== want) throw new Error(`murmur3("${text}", ${seed}) = ${got.toString(16)}`);
  }
});

Deno.test("backend key hashes are two different u32s", () => {
  const [a, b] = backendKeyHashes("10.1.0.1:8080");
  if (a === b || a >>> 0 !== a || b >>> 0 !== b) throw new Error(`${a} ${b}`);
});

Deno.test("murmur3String: the ASCII fast path and the UTF-8 path give the reference hashes", () => {
  const enc = new TextEncoder();
  // Values of the single-path implementation (UTF-8 bytes), seed 0x686f6c64.
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
  for (const [k, h] of want) {
    if (murmur3String(k, KEY_SEED_OFFSET) !== h) throw new Error(`murmur3String("${k}")`);
    if (murmur3_32(enc.encode(k), KEY_SEED_OFFSET) !== h) throw new Error(`murmur3_32("${k}")`);
  }
});
