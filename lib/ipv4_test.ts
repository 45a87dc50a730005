import { deepStrictEqual } from "node:assert/strict";
import { formatIpv4, ipv4Bytes, ipv4Text, isIpv4, parseIpv4, parseIpv4Cidr } from "./ipv4.ts";

Deno.test("IPv4 parses and formats in every form; bad input is rejected naming the value", () => {
  deepStrictEqual(parseIpv4("10.0.0.1"), 0x0a000001);
  deepStrictEqual(parseIpv4("255.255.255.255"), 0xffffffff);
  deepStrictEqual(formatIpv4(0xc0a80101), "192.168.1.1");
  deepStrictEqual([...ipv4Bytes("10.1.2.3")], [10, 1, 2, 3]);
  deepStrictEqual(ipv4Text(new Uint8Array([0, 192, 168, 0, 9]), 1), "192.168.0.9");
  for (const bad of ["10.0.0", "10.0.0.256", "a.b.c.d", "1.2.3.4.5", "", "01234.1.1.1"]) {
    let msg = "";
    try {
      parseIpv4(bad);
    } catch (e) {
      msg = (e as Error).message;
    }
    if (!msg.startsWith(`Cannot parse IPv4 address "${bad}"`)) throw new Error(msg || bad);
    deepStrictEqual(isIpv4(bad), false);
  }
});

Deno.test("IPv4 CIDR: first and last address; bad prefix or host bits set are rejected with the network named", () => {
  const c = parseIpv4Cidr("10.0.100.0/28");
  deepStrictEqual([formatIpv4(c.first), formatIpv4(c.last), c.prefixLength], [
    "10.0.100.0",
    "10.0.100.15",
    28,
  ]);
  const all = parseIpv4Cidr("0.0.0.0/0");
  deepStrictEqual([all.first, all.last], [0, 0xffffffff]);
  const one = parseIpv4Cidr("192.0.2.7/32");
  deepStrictEqual([one.first, one.last], [0xc0000207, 0xc0000207]);
  const messages: Record<string, string> = {
    "10.0.0.0": "expected ADDRESS/PREFIX",
    "10.0.0.0/33": "prefix 0..32",
    "10.0.0.0/": "prefix 0..32",
    "10.0.0/24": "four dot-separated octets",
    "10.0.0.5/24": "host bits are set (the network is 10.0.0.0/24)",
  };
  for (const [bad, why] of Object.entries(messages)) {
    let msg = "";
    try {
      parseIpv4Cidr(bad);
    } catch (e) {
      msg = (e as Error).message;
    }
    if (!msg.startsWith(`Cannot parse IPv4 CIDR "${bad}"`) || !msg.includes(why)) {
      throw new Error(`${bad}: ${msg}`);
    }
  }
});
