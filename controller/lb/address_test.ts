import { assertEquals, assertRejects } from "../_testing.ts";
import { formatAddr, hostPort, isAddr, parseAddr } from "./address.ts";

Deno.test("address: the fast validator agrees with the parser", async () => {
  const cases = [
    "10.0.0.1:80/TCP",
    "255.255.255.255:65535/UDP",
    "1.2.3.4:1/TCP",
    "10.0.0.1:0/TCP",
    "10.0.0.1:65536/TCP",
    "256.0.0.1:80/TCP",
    "10.0.0:80/TCP",
    "10.0.0.1:80/SCTP",
    "10.0.0.1:80/tcp",
    "10.0.0.1/TCP",
    "10.0.0.1:80",
    "1.2.3.4.5:80/TCP",
    "01.2.3.4:8/UDP",
    "1234.2.3.4:8/UDP",
    "a.b.c.d:1/TCP",
    "",
    "10.0.0.1:80/TCPX",
  ];
  for (const c of cases) {
    let ok = true;
    try {
      parseAddr(c);
    } catch {
      ok = false;
    }
    assertEquals(isAddr(c), ok, c);
  }
  assertEquals(parseAddr("10.0.0.1:80/UDP"), { ip: "10.0.0.1", port: 80, protocol: "UDP" });
  assertEquals(hostPort("10.0.0.1:80/UDP"), "10.0.0.1:80");
  assertEquals(formatAddr("10.0.0.1", 80, "tcp"), "10.0.0.1:80/TCP");
  await assertRejects(
    () => parseAddr("10.0.0.300:80/TCP"),
    'Cannot parse address "10.0.0.300:80/TCP"',
  );
});
