/**
 * Path-MTU discovery for IPv6 DSR replies, end to end in network namespaces (docs/contracts.md
 * "IPv6", ICMPv6 errors to the owning backend); the rig and its topology are in _pmtud_rig.ts:
 *
 * ```
 *  client ── e0 edge w0 ══ MTU 1280 ══ e1 router ─┬─ l1 ── lb1 (XDP hf_lb)
 * 2001:db8:10::2 (1500)                           └─ b1 ── be1 (decap, VIP6 on lo, server)
 * ```
 *
 * be1 answers the client straight through the router (DSR, source = the VIP) with full-size
 * segments (the client's MSS is 1440). The router cannot forward them over the 1280 link and sends
 * ICMPv6 Packet Too Big to their source, the VIP — which the router routes to lb1. Only if lb1
 * hands it to be1 (encapsulated over IPv6 like the flow's packets) does be1 lower its path MTU and
 * the download finish. The control step drops the router's Packet Too Big on its way to lb1: the
 * same download hangs.
 */

import { rootTest } from "../harness/mod.ts";
import { assertDownloadFinishes, assertHangsWithoutTooBig, openPmtudRig } from "./_pmtud_rig.ts";

rootTest(
  "IPv6 PMTUD through the LB: a client behind an MTU-1280 link downloads 1 MB",
  async (t) => {
    await using rig = await openPmtudRig(6);
    await t.step(
      "control: Packet Too Big never reaches the LB — the download hangs",
      () => assertHangsWithoutTooBig(rig),
    );
    await t.step(
      "the LB hands Packet Too Big to the backend: the download finishes",
      () => assertDownloadFinishes(rig),
    );
  },
);
