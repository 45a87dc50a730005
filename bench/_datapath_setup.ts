/**
 * What `bench/datapath.ts` measures against: the LB IP, the client, and maps loaded with one
 * service of 10 backends (M = 1021), identical for every object under test.
 *
 * @module
 */

import type { BpfLBMaps, LbConfig } from "../node/bpf/mod.ts";
import { TsMaglevBuilder } from "../policy-as/host/maglev_ts.ts";
import { tcpFrame } from "../lab/packets.ts";

/** The benchmark's LB IP. */
export const VIP = "10.0.100.1";
/** The benchmark's client address. */
export const CLIENT = "10.0.0.1";

/** Loads a datapath object's maps with one service of 10 backends, M = 1021. */
export async function populate(dp: { lbMaps(): BpfLBMaps; configure(cfg: LbConfig): void }) {
  // every new flow shared at once: the new-flow path is measured, not the event budget's limit
  dp.configure({ srcAddr: "10.1.1.2", encapPort: 6080, seed: 0, eventBudget: 0xffffffff });
  const lb = dp.lbMaps();
  const backends = Array.from({ length: 10 }, (_, i) => i + 1);
  for (const id of backends) await lb.updateBackend(id, { address: `10.2.0.${id}`, port: 80 });
  const table = new TsMaglevBuilder().build(
    backends.map((id) => ({ key: `b${id}`, weight: 1 })),
    1021,
  );
  await lb.updateMaglev(1, table);
  await lb.updateService({ address: VIP, port: 80, protocol: "TCP" }, {
    serviceId: 1,
    backendCount: backends.length,
    flowKeyMode: "five-tuple",
    maglevSize: table.length,
  });
}

/** An established flow's packet (ACK): the hit path. */
export const hitFrame = tcpFrame(CLIENT, VIP, {
  sport: 40000,
  dport: 80,
  flags: 0x10,
  payload: new Uint8Array(64),
});

/** A new flow's first packet that confirms it (an ACK, as when another node saw the SYN): the
 * whole miss path — Maglev, hf_flows insert, event. A SYN would only be held in hf_flows_syn
 * (docs/contracts.md "When a flow is shared"). */
export const missFrame = tcpFrame(CLIENT, VIP, {
  sport: 50000,
  dport: 80,
  flags: 0x10,
  payload: new Uint8Array(64),
});
/** Not for a frontend: parsed, looked up, passed untouched (nothing to restore). */
export const passFrame = tcpFrame(CLIENT, "10.9.9.9", {
  sport: 40000,
  dport: 80,
  flags: 0x10,
  payload: new Uint8Array(64),
});
