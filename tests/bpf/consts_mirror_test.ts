/**
 * The TypeScript mirrors of bpf/consts.h (node/bpf/consts.ts, FLOW_F_* in node/bpf/flow.ts)
 * hold the same numbers and name the same counters at the same indices as the C; every
 * `HF_MAX_*` of the C has a mirror, so a new map size cannot be missed by user space.
 */

import { deepStrictEqual, strictEqual } from "node:assert/strict";
import {
  DECAP_REASONS,
  FLOW_F_PEER,
  FLOW_F_UNSHARED,
  HF_ENCAP_OVERHEAD,
  HF_ENCAP_PORT_DEFAULT,
  HF_EVENT_BUDGET_DEFAULT,
  HF_MAGLEV_TEMPLATE_SIZE,
  HF_MAX,
  HF_RINGBUF_BYTES,
  NODE_REASONS,
  PROTO,
  REASONS,
  SVC_F_CLIENT_IP,
  SVC_F_DRAINING,
} from "../../node/bpf/mod.ts";

const CONSTS_H = await Deno.readTextFile(new URL("../../bpf/consts.h", import.meta.url));

function enumNames(enumName: string, prefix: string): string[] {
  const body = CONSTS_H.slice(CONSTS_H.indexOf(`enum ${enumName} {`));
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

/** `#define HF_X value` → number, for values made of integers, shifts, `+` and `(u)` suffixes. */
function defines(): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of CONSTS_H.matchAll(/^#define (HF_\w+) (.+?)\s*(?:\/\*.*)?$/gm)) {
    const expr = m[2]!.replace(/(\d)u\b/g, "$1");
    if (!/^[\d\sx()a-fA-F<+*-]+$/.test(expr)) continue;
    out.set(m[1]!, new Function(`return (${expr});`)() as number);
  }
  return out;
}

Deno.test("REASONS mirrors enum hf_reason", () => {
  deepStrictEqual([...REASONS], enumNames("hf_reason", "HF_R_"));
});

Deno.test("DECAP_REASONS mirrors enum hf_decap_reason", () => {
  deepStrictEqual([...DECAP_REASONS], enumNames("hf_decap_reason", "HF_D_"));
});

Deno.test("NODE_REASONS mirrors enum hf_node_reason", () => {
  deepStrictEqual([...NODE_REASONS], enumNames("hf_node_reason", "HF_N_"));
});

Deno.test("numbers of bpf/consts.h that user space uses are mirrored exactly", () => {
  const c = defines();
  const mirrors: Record<string, number> = {
    HF_IPPROTO_ICMP: PROTO.ICMP,
    HF_IPPROTO_TCP: PROTO.TCP,
    HF_IPPROTO_UDP: PROTO.UDP,
    HF_SVC_F_CLIENT_IP: SVC_F_CLIENT_IP,
    HF_SVC_F_DRAINING: SVC_F_DRAINING,
    HF_FLOW_F_PEER: FLOW_F_PEER,
    HF_FLOW_F_UNSHARED: FLOW_F_UNSHARED,
    HF_ENCAP_OVERHEAD: HF_ENCAP_OVERHEAD,
    HF_ENCAP_PORT_DEFAULT: HF_ENCAP_PORT_DEFAULT,
    HF_MAGLEV_TEMPLATE_SIZE: HF_MAGLEV_TEMPLATE_SIZE,
    HF_RINGBUF_BYTES: HF_RINGBUF_BYTES,
    HF_EVENT_BUDGET_DEFAULT: HF_EVENT_BUDGET_DEFAULT,
  };
  for (const [name, value] of Object.entries(HF_MAX)) mirrors[`HF_MAX_${name}`] = value;
  for (const [name, value] of Object.entries(mirrors)) {
    strictEqual(c.get(name), value, `${name} in bpf/consts.h vs node/bpf/consts.ts`);
  }
  const unmirrored = [...c.keys()].filter((n) => n.startsWith("HF_MAX_") && !(n in mirrors));
  deepStrictEqual(unmirrored, [], "HF_MAX_* without a TypeScript mirror in HF_MAX");
});
