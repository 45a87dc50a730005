import { deepStrictEqual } from "node:assert/strict";
import { decodeFlowValue, decodeStreamFlows, encodeFlowValue, vipKeys } from "./schema.ts";

Deno.test("schema keys share the LB IP hash tag; values round-trip", () => {
  deepStrictEqual(vipKeys("10.0.100.1"), {
    instance: "hf:{10.0.100.1}:instance",
    sweeper: "hf:{10.0.100.1}:sweeper",
    flows: "hf:{10.0.100.1}:flows",
    seen: "hf:{10.0.100.1}:seen",
    events: "hf:{10.0.100.1}:events",
  });
  deepStrictEqual(encodeFlowValue(0x0a000102, 1700000000123), "0a000102:1700000000123");
  deepStrictEqual(decodeFlowValue("0a000102:1700000000123"), {
    backend: 0x0a000102,
    learnedMs: 1700000000123,
  });
});

Deno.test("schema: values written with the old epoch field are still read", () => {
  deepStrictEqual(decodeFlowValue("0a000102:0:1700000000123"), {
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

Deno.test("stream flows: v2 and v1 values read; a later version's items are skipped, not thrown", () => {
  const f4 = "0a0000019c40005006", f6 = "20010db80000000000000000000000070000003511";
  deepStrictEqual(
    decodeStreamFlows(
      "add",
      `${f4}=0a010003:1700000000000,${f4}=0a010004:0:1700000000000,` +
        `${f6}=20010db8000100000000000000000003:1700000000123`,
    ),
    {
      flows: [
        { field: f4, backend: 0x0a010003 },
        { field: f4, backend: 0x0a010004 },
        { field: f6, backend: "2001:db8:1::3" },
      ],
      skipped: 0,
    },
  );
  deepStrictEqual(decodeStreamFlows("del", `${f4},${f6},`), {
    flows: [{ field: f4, backend: 0 }, { field: f6, backend: 0 }],
    skipped: 0,
  });
  // Forms this version does not know: a value with a tagged backend, a longer field, no value.
  deepStrictEqual(
    decodeStreamFlows("add", `${f4}=v3|0a010003:1,${f4}00=0a010003:1,${f4},${f4}=0a010003:2`),
    { flows: [{ field: f4, backend: 0x0a010003 }], skipped: 3 },
  );
  deepStrictEqual(decodeStreamFlows("del", `${f4}zz,xyz,${f4}`), {
    flows: [{ field: f4, backend: 0 }],
    skipped: 2,
  });
});
