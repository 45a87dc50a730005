/**
 * The TypeScript mirrors of bpf/consts.h enums (node/bpf/structs.ts REASONS, DECAP_REASONS) name
 * the same counters at the same indices as the C.
 */

import { deepStrictEqual } from "node:assert/strict";
import { DECAP_REASONS, REASONS } from "../../node/bpf/mod.ts";

async function enumNames(enumName: string, prefix: string): Promise<string[]> {
  const text = await Deno.readTextFile(new URL("../../bpf/consts.h", import.meta.url));
  const body = text.slice(text.indexOf(`enum ${enumName} {`));
  const names: string[] = [];
  for (
    const m of body.slice(0, body.indexOf("};")).matchAll(
      new RegExp(`${prefix}(\\w+) = (\\d+)`, "g"),
    )
  ) {
    if (m[1] === "COUNT") continue;
    names[Number(m[2])] = m[1]!.toLowerCase();
  }
  return names;
}

Deno.test("REASONS mirrors enum hf_reason", async () => {
  deepStrictEqual([...REASONS], await enumNames("hf_reason", "HF_R_"));
});

Deno.test("DECAP_REASONS mirrors enum hf_decap_reason", async () => {
  deepStrictEqual([...DECAP_REASONS], await enumNames("hf_decap_reason", "HF_D_"));
});
