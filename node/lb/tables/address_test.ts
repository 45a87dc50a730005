import { deepStrictEqual, throws } from "node:assert/strict";
import { formatAddr, hostPort, isAddr, joinHostPort, parseAddr, splitHostPort } from "./address.ts";

Deno.test("address: the fast validator agrees with the parser", () => {
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
    deepStrictEqual(isAddr(c), ok, c);
  }
  deepStrictEqual(parseAddr("10.0.0.1:80/UDP"), { ip: "10.0.0.1", port: 80, protocol: "UDP" });
  deepStrictEqual(hostPort("10.0.0.1:80/UDP"), "10.0.0.1:80");
  deepStrictEqual(formatAddr("10.0.0.1", 80, "tcp"), "10.0.0.1:80/TCP");
  throws(
    () => parseAddr("10.0.0.300:80/TCP"),
    /Cannot parse address "10\.0\.0\.300:80\/TCP"/,
  );
});

Deno.test("address: IPv6 in brackets, RFC 5952 text only, one key per address", () => {
  deepStrictEqual(parseAddr("[2001:db8::1]:80/TCP"), {
    ip: "2001:db8::1",
    port: 80,
    protocol: "TCP",
  });
  deepStrictEqual(formatAddr("2001:db8::1", 80, "udp"), "[2001:db8::1]:80/UDP");
  deepStrictEqual(hostPort("[2001:db8::1]:80/TCP"), "[2001:db8::1]:80");
  deepStrictEqual(joinHostPort("2001:db8::1", 80), "[2001:db8::1]:80");
  deepStrictEqual(joinHostPort("10.0.0.1", 80), "10.0.0.1:80");
  deepStrictEqual(splitHostPort("[2001:db8::1]:8080"), { ip: "2001:db8::1", port: 8080 });
  deepStrictEqual(splitHostPort("10.0.0.1:8080"), { ip: "10.0.0.1", port: 8080 });
  for (
    const [bad, why] of [
      ["[2001:DB8::1]:80/TCP", 'not in RFC 5952 form, write "2001:db8::1"'],
      ["[2001:db8:0::1]:80/TCP", 'write "2001:db8::1"'],
      ["[2001:db8::g]:80/TCP", 'group "g" is not 1..4 hex digits'],
      ["[2001:db8::1]:0/TCP", "port 0 out of 1..65535"],
      ["2001:db8::1:80/TCP", "expected IPv4:PORT/TCP|UDP or [IPv6]:PORT/TCP|UDP"],
      ["[2001:db8::1]/TCP", "expected [IPv6]:PORT/TCP|UDP"],
    ]
  ) {
    deepStrictEqual(isAddr(bad!), false, bad);
    throws(() => parseAddr(bad!), (e: unknown) => e instanceof Error && e.message.includes(why!));
  }
});
