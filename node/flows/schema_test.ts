import { decodeFlowValue, encodeFlowValue, vipKeys } from "./schema.ts";

function assertEquals(a: unknown, b: unknown) {
  if (JSON.stringify(a) !== JSON.stringify(b)) {
    throw new Error(`${JSON.stringify(a)} !== ${JSON.stringify(b)}`);
  }
}

Deno.test("schema keys share the LB IP hash tag; values round-trip", () => {
  assertEquals(vipKeys("10.0.100.1"), {
    instance: "hf:{10.0.100.1}:instance",
    sweeper: "hf:{10.0.100.1}:sweeper",
    flows: "hf:{10.0.100.1}:flows",
    seen: "hf:{10.0.100.1}:seen",
    events: "hf:{10.0.100.1}:events",
  });
  assertEquals(encodeFlowValue(0x0a000102, 1700000000123), "0a000102:1700000000123");
  assertEquals(decodeFlowValue("0a000102:1700000000123"), {
    backend: 0x0a000102,
    learnedMs: 1700000000123,
  });
});

Deno.test("schema: values written with the old epoch field are still read", () => {
  assertEquals(decodeFlowValue("0a000102:0:1700000000123"), {
    backend: 0x0a000102,
    learnedMs: 1700000000123,
  });
  for (const bad of ["", "0a000102", "zz000102:1", "0a000102:x"]) {
    let threw = false;
    try {
      decodeFlowValue(bad);
    } catch (err) {
      threw = (err as Error).message.includes(`"${bad}"`);
    }
    if (!threw) throw new Error(`"${bad}" decoded without an error naming it`);
  }
});
