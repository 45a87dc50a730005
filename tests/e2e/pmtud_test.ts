/**
 * Path-MTU discovery for DSR replies, end to end in network namespaces (issue 13 part 1,
 * docs/mtu.md "PMTUD on the return path"); the rig and its topology are in _pmtud_rig.ts:
 *
 * ```
 *  client ── e0 edge w0 ══ MTU 1280 ══ e1 router ─┬─ l1 ── lb1 (XDP hf_lb)
 * 10.10.0.2   (1500)                              └─ b1 ── be1 (decap, 10.0.100.1 on lo, server)
 * ```
 *
 * be1 answers the client straight through the router (DSR, source = the VIP) with full-size
 * segments (the client's MSS is 1460). The router cannot forward them over the 1280 link and sends
 * ICMP fragmentation-needed to their source, the VIP — which the router routes to lb1. Only if lb1
 * hands that ICMP to be1 (encapsulated like the flow's packets) does be1 lower its path MTU and
 * the download finish. The control step drops the router's ICMP on its way to lb1, as an LB that
 * keeps ICMP for itself would: the same download hangs.
 */

import { rootTest } from "../harness/mod.ts";
import { assertDownloadFinishes, assertHangsWithoutTooBig, openPmtudRig } from "./_pmtud_rig.ts";

rootTest("PMTUD through the LB: a client behind an MTU-1280 link downloads 1 MB", async (t) => {
  await using rig = await openPmtudRig(4);
  await t.step(
    "control: the router's ICMP never reaches the LB — the download hangs",
    () => assertHangsWithoutTooBig(rig),
  );
  await t.step(
    "the LB hands frag-needed to the backend: the download finishes",
    () => assertDownloadFinishes(rig),
  );
});
