// Holdfast policy module (AssemblyScript → WASM).
//
// ABI version 1 — numbers-only exports over linear memory, no imports. The host side
// (policy-as/host/) validates every export listed in policy-as/host/abi.ts before use.
//
//   abi_version(): u32                                  → 1
//   flow_hash_5tuple(saddr, daddr, sport, dport, proto, seed): u32   (docs/contracts.md)
//   flow_hash_client_ip(saddr, seed): u32
//   flow_hash6_5tuple(s0..s3, d0..d3, sport, dport, proto, seed): u32   IPv6, optional
//   flow_hash6_client_ip(s0..s3, seed): u32                            IPv6, optional
//   maglev_input_ptr(n, m): usize    reserve memory for n backends and a table of m slots;
//                                    returns where the host writes n records of three u32
//                                    {keyHash1, keyHash2, weight} (12 bytes each); 0 = no memory
//   maglev_build(n, m): i32          fill the table; >= 0: backends used (weight > 0),
//                                    < 0: error code (see MAGLEV_ERR_* below)
//   maglev_table_ptr(): usize        where the m u32 slots are: backend input index + 1, 0 = empty
//   health_record_ptr(): usize       32-byte scratch record the host fills before health_step
//   health_step(ok, now_ms, rise, fall, backoff_base_ms, backoff_max_ms): u32  new state
//
// Determinism: backends are sorted by (keyHash1, keyHash2) before filling, so the table depends
// only on the set of (key, weight) pairs, never on their input order.

export function abi_version(): u32 {
  return 1;
}

export { flow_hash_5tuple, flow_hash_client_ip } from "./flow_hash";
// Optional (not in REQUIRED_EXPORTS, so modules built before IPv6 stay valid):
export { flow_hash6_5tuple, flow_hash6_client_ip } from "./flow_hash";
export { maglev_input_ptr, maglev_build, maglev_table_ptr } from "./maglev";
export { health_record_ptr, health_step } from "./health";
