import { deepStrictEqual, strictEqual, throws } from "node:assert/strict";
import {
  formatIpv6,
  formatIpv6BigInt,
  ipv6BigInt,
  ipv6Bytes,
  ipv6Words,
  isGlobalUnicastIpv6,
  isIpv6,
  parseIpv6Cidr,
  writeIpv6,
} from "./ipv6.ts";

Deno.test("IPv6 text round-trips in RFC 5952 form", () => {
  const cases: Array<[string, string]> = [
    ["::", "::"],
    ["::1", "::1"],
    ["2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
    ["fe80::1:2", "fe80::1:2"],
    ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2:3:4:5:6"],
    ["2001:db8::1:0", "2001:db8::1:0"],
    ["1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"],
    ["::ffff:10.0.0.1", "::ffff:a00:1"],
  ];
  for (const [text, canonical] of cases) strictEqual(formatIpv6(ipv6Bytes(text)), canonical, text);
});

Deno.test("IPv6 bytes and words are network order", () => {
  deepStrictEqual([...ipv6Bytes("2001:db8::ff01")], [
    0x20,
    0x01,
    0x0d,
    0xb8,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0xff,
    0x01,
  ]);
  deepStrictEqual(ipv6Words("2001:db8::ff01"), [0x20010db8, 0, 0, 0xff01]);
});

Deno.test("IPv6 text: the one-pass parser agrees with the full one on every form", () => {
  // Random addresses in every zero pattern, formatted canonically, in full, upper case and with
  // leading zeros: each parses back to its bytes.
  let seed = 12345;
  const rand = () => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 16;
  for (let t = 0; t < 2000; t++) {
    const b = new Uint8Array(16);
    const zeros = rand() & 0xff;
    for (let g = 0; g < 8; g++) {
      if (zeros & (1 << g)) continue;
      b[2 * g] = rand() & 0xff;
      b[2 * g + 1] = rand() & 0xff;
    }
    const groups = Array.from({ length: 8 }, (_, g) => (b[2 * g]! << 8) | b[2 * g + 1]!);
    for (
      const text of [
        formatIpv6(b),
        groups.map((g) => g.toString(16)).join(":"),
        groups.map((g) => g.toString(16).toUpperCase().padStart(4, "0")).join(":"),
      ]
    ) deepStrictEqual([...ipv6Bytes(text)], [...b], text);
  }
  for (
    const [text, canonical] of [
      ["::", "::"],
      ["1::", "1::"],
      ["::1:2", "::1:2"],
      ["1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"],
      ["::2:3:4:5:6:7:8", "0:2:3:4:5:6:7:8"],
      ["0001:0db8::", "1:db8::"],
    ]
  ) strictEqual(formatIpv6(ipv6Bytes(text!)), canonical, text);
  for (
    const bad of [
      ":",
      ":1",
      "1:",
      "1:::2",
      ":::",
      "1:2:3:4:5:6:7:8::",
      "::1:2:3:4:5:6:7:8",
      "1 ::2",
    ]
  ) {
    throws(() => ipv6Bytes(bad), (e: Error) => e.message.includes(`"${bad}"`), bad);
    const out = new Uint8Array(20).fill(7);
    throws(() => writeIpv6(bad, out, 2), (e: Error) => e.message.includes(`"${bad}"`), bad);
    deepStrictEqual([...out], new Array(20).fill(7), `${bad}: nothing written`);
  }
  // Into a buffer at an offset, the bytes around it untouched; a dotted tail too.
  const out = new Uint8Array(20).fill(7);
  writeIpv6("2001:db8::1", out, 2);
  deepStrictEqual([...out.subarray(2, 18)], [...ipv6Bytes("2001:db8::1")]);
  deepStrictEqual([out[0], out[1], out[18], out[19]], [7, 7, 7, 7]);
  writeIpv6("::ffff:10.0.0.1", out, 2);
  strictEqual(formatIpv6(out, 2), "::ffff:a00:1");
});

Deno.test("bad IPv6 text is refused with the text quoted", () => {
  for (
    const bad of ["1::2::3", "1:2:3:4:5:6:7", "12345::", "g::1", "1:2:3:4:5:6:7:8:9", "10.0.0.1"]
  ) {
    throws(() => ipv6Bytes(bad), (e: Error) => e.message.includes(`"${bad}"`), bad);
    strictEqual(isIpv6(bad), false, bad);
  }
});

Deno.test("global unicast IPv6: a node's own address, never ::, ::1, link-local, multicast, mapped", () => {
  for (const a of ["2001:db8::1", "fd00::5", "2606:4700::1111"]) {
    strictEqual(isGlobalUnicastIpv6(a), true, a);
  }
  for (const a of ["::", "::1", "fe80::1", "febf::1", "ff02::1", "::ffff:10.0.0.1"]) {
    strictEqual(isGlobalUnicastIpv6(a), false, a);
  }
});

Deno.test("IPv6 as a 128-bit integer round-trips; CIDRs give their range and refuse host bits", () => {
  strictEqual(ipv6BigInt("::1"), 1n);
  strictEqual(ipv6BigInt("2001:db8::"), 0x20010db8n << 96n);
  strictEqual(formatIpv6BigInt(ipv6BigInt("2001:DB8:0:0::ff")), "2001:db8::ff");
  strictEqual(formatIpv6BigInt((1n << 128n) - 1n), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
  throws(() => formatIpv6BigInt(1n << 128n), /not in 0\.\.2\^128-1/);
  const c = parseIpv6Cidr("2001:db8:100::/64");
  strictEqual(formatIpv6BigInt(c.last), "2001:db8:100:0:ffff:ffff:ffff:ffff");
  strictEqual(c.last - c.first + 1n, 1n << 64n);
  strictEqual(parseIpv6Cidr("::/0").last, (1n << 128n) - 1n);
  throws(
    () => parseIpv6Cidr("2001:db8::5/64"),
    /host bits are set \(the network is 2001:db8::\/64\)/,
  );
  throws(() => parseIpv6Cidr("2001:db8::/129"), /prefix 0\.\.128/);
  throws(() => parseIpv6Cidr("2001:db8::g/64"), /Cannot parse IPv6 CIDR "2001:db8::g\/64"/);
});
