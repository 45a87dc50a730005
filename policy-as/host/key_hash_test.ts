import { backendKeyHashes, murmur3_32 } from "./key_hash.ts";

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
