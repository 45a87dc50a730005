/**
 * Kernel conntrack through ctnetlink (raw netlink via Deno FFI to libc): dump a namespace's
 * table, inject entries in the form a NAT failover needs (orig tuple, reply = plain inverse,
 * CTA_NAT_SRC min = max = translated address and port, timeout, TCP ESTABLISHED), delete them,
 * and follow new/update/destroy events.
 *
 * @example
 * ```ts ignore
 * import { Conntrack } from "./mod.ts";
 * const a = Conntrack.open({ netns: "hf-1234-nat1" });
 * const b = Conntrack.open({ netns: "hf-1234-nat2" });
 * const { failed } = b.inject(a.dump({ natSrcAddrs: new Set([0xc6120064]) }));
 * ```
 *
 * @module
 */

export {
  checkRecords,
  CtDecodeError,
  type CtEntry,
  type CtTuple,
  inverse,
  IPS_ASSURED,
  IPS_CONFIRMED,
  IPS_SEEN_REPLY,
  IPS_SRC_NAT,
  readRecord,
  RECORD_LEN,
  TCP_ESTABLISHED,
  tupleText,
  writeRecord,
} from "./_ctnetlink.ts";
export { NetlinkError } from "./_netlink.ts";
export { Conntrack, type CtFailure, type DumpFilter, failureText } from "./conntrack.ts";
export {
  ConntrackEvents,
  type ConntrackEventsOptions,
  type CtEvent,
  type CtEventType,
} from "./events.ts";
