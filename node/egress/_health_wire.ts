/**
 * The heartbeat datagram of {@link PeerHealth} (`health.ts`): a small JSON object,
 * `{"t":"hf-egress-hb","v":1,"n":NAME,"s":SEQ,"b":BOOT,"d":0|1}`, and `"r":0` from a pod that
 * must not be given floating addresses yet (BGP mode: no session established; absent means ready,
 * so a ready pod's datagram is the same as before and an older pod reading it ignores the field).
 * Anything else on the port (malformed, oversized, another version) decodes to `null` and is
 * ignored.
 *
 * @module
 */

/** One heartbeat. */
export interface Heartbeat {
  /** Sender's pod name. */
  readonly name: string;
  /** Sequence number, growing by one per heartbeat within a boot. */
  readonly seq: number;
  /** Random id of the sender's process start: a new one means a restarted peer. */
  readonly boot: string;
  /** The sender is draining (handing its addresses over). */
  readonly draining: boolean;
  /** The sender may be given floating addresses (false: its BGP sessions are down). Default true. */
  readonly ready?: boolean;
}

const TAG = "hf-egress-hb";
/**
 * Version of the heartbeat datagram, its `v` field (docs/contracts.md "Format versions"). A
 * datagram of another version decodes to null: ignored, as if the peer were silent.
 */
export const HEARTBEAT_VERSION = 1;
/** Datagrams above this size are not heartbeats. */
export const MAX_HEARTBEAT_BYTES = 512;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** The datagram for `hb`. */
export function encodeHeartbeat(hb: Heartbeat): Uint8Array {
  return encoder.encode(
    JSON.stringify({
      t: TAG,
      v: HEARTBEAT_VERSION,
      n: hb.name,
      s: hb.seq,
      b: hb.boot,
      d: hb.draining ? 1 : 0,
      ...(hb.ready === false ? { r: 0 } : {}),
    }),
  );
}

/** The heartbeat in `data`, or null when it is not one. Never throws. */
export function decodeHeartbeat(data: Uint8Array): Heartbeat | null {
  if (data.length === 0 || data.length > MAX_HEARTBEAT_BYTES) return null;
  let v: unknown;
  try {
    v = JSON.parse(decoder.decode(data));
  } catch {
    return null;
  }
  if (typeof v !== "object" || v === null) return null;
  const o = v as Record<string, unknown>;
  if (o.t !== TAG || o.v !== HEARTBEAT_VERSION) return null;
  if (typeof o.n !== "string" || o.n === "" || typeof o.b !== "string" || o.b === "") return null;
  if (typeof o.s !== "number" || !Number.isSafeInteger(o.s) || o.s < 0) return null;
  if (o.d !== 0 && o.d !== 1) return null;
  if (o.r !== undefined && o.r !== 0 && o.r !== 1) return null;
  return { name: o.n, seq: o.s, boot: o.b, draining: o.d === 1, ready: o.r !== 0 };
}
