import { formatIpv4, ipv4Bytes, ipv4Text, isIpv4, parseIpv4 } from "./ipv4.ts";

function assertEquals(a: unknown, b: unknown) {
  if (JSON.stringify(a) !== JSON.stringify(b)) {
    throw new Error(`${JSON.stringify(a)} !== ${JSON.stringify(b)}`);
  }
}

Deno.test("IPv4 parses and formats in every form; bad input is rejected naming the value", () => {
  assertEquals(parseIpv4("10.0.0.1"), 0x0a000001);
  assertEquals(parseIpv4("255.255.255.255"), 0xffffffff);
  assertEquals(formatIpv4(0xc0a80101), "192.168.1.1");
  assertEquals([...ipv4Bytes("10.1.2.3")], [10, 1, 2, 3]);
  assertEquals(ipv4Text(new Uint8Array([0, 192, 168, 0, 9]), 1), "192.168.0.9");
  for (const bad of ["10.0.0", "10.0.0.256", "a.b.c.d", "1.2.3.4.5", "", "01234.1.1.1"]) {
    let msg = "";
    try {
      parseIpv4(bad);
    } catch (e) {
      msg = (e as Error).message;
    }
    if (!msg.startsWith(`Cannot parse IPv4 address "${bad}"`)) throw new Error(msg || bad);
    assertEquals(isIpv4(bad), false);
  }
});
