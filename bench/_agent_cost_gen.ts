/**
 * The traffic of `bench/agent_cost.ts`: packets run through the learning node's real XDP program
 * (BPF_PROG_TEST_RUN over the maps that node pinned), so the program itself creates each flow
 * and emits its new-flow event into the ring buffer the agent reads, as in production. A new flow
 * is a SYN and the client's first ACK from a distinct client address (the datapath shares a flow
 * once the ACK confirms it), at a fixed rate; established flows get ACKs (the hit path: no
 * event, no user-space work).
 *
 * @module
 */

import { type Datapath, testRun, XDP } from "../node/bpf/mod.ts";
import { tcpFrame } from "../lab/packets.ts";
import { tcpFrame6 } from "../lab/packets6.ts";

/** The bench's LB IPs (one frontend per family, the same IPv4 backends) and port. */
export const VIP = "10.0.100.1";
export const VIP6 = "2001:db8:100::1";
export const PORT = 80;

/** IP family of the generated flows. */
export type Family = 4 | 6;

const NEW_BASE = 0x0a800000; // 10.128.0.0: one client address per new flow
const ESTABLISHED_BASE = 0x0a400000; // 10.64.0.0

/** IPv4 header checksum of the 20-byte header at `off` (its check field included as is). */
function ipChecksum(b: Uint8Array, off: number): number {
  let sum = 0;
  for (let i = off; i < off + 20; i += 2) sum += (b[i]! << 8) | b[i + 1]!;
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return (~sum) & 0xffff;
}

/**
 * A frame from client `saddr` (host order), patched into a template: the IPv4 source (and its
 * header checksum), or the last 32 bits of the IPv6 source (no header checksum; the program does
 * not check the TCP one).
 */
function patch(template: Uint8Array, saddr: number, family: Family): Uint8Array {
  const f = template.slice();
  const v = new DataView(f.buffer);
  if (family === 6) {
    v.setUint32(14 + 8 + 12, saddr); // Ethernet 14 + IPv6 source at 8, its last 4 bytes
    return f;
  }
  v.setUint32(26, saddr); // Ethernet 14 + IPv4 source at 12
  v.setUint16(24, 0);
  v.setUint16(24, ipChecksum(f, 14));
  return f;
}

/** What one paced run sent. */
export interface GeneratorRun {
  /** New flows (SYNs that the program answered with XDP_TX). */
  readonly newFlows: number;
  /** Packets of established flows. */
  readonly established: number;
  /** Wall time of the run, s. */
  readonly seconds: number;
}

/** Sends new and established flows' packets through one node's XDP program. */
export class FlowGenerator {
  readonly #dp: Datapath;
  /** Where new flows go, round robin (default only the learning node). */
  #learners: Datapath[];
  #nextLearner = 0;
  // A flow is shared on the client's first ACK, not its SYN (docs/contracts.md "When a flow is
  // shared"): a new flow's first packet here is that ACK (as when another node saw the SYN).
  readonly #family: Family;
  readonly #syn: Uint8Array;
  readonly #ack: Uint8Array;
  #established: Uint8Array[] = [];
  #nextNew = 0;
  #nextAck = 0;

  /** `dp`: the learning node's datapath, opened over its pinned maps; `family`: of the flows. */
  constructor(dp: Datapath, family: Family = 4) {
    this.#dp = dp;
    this.#learners = [dp];
    this.#family = family;
    const f = { sport: 40000, dport: PORT, flags: 0x10 };
    this.#syn = family === 6
      ? tcpFrame6("2001:db8:128::", VIP6, f)
      : tcpFrame("10.128.0.0", VIP, f);
    this.#ack = family === 6 ? tcpFrame6("2001:db8:64::", VIP6, f) : tcpFrame("10.64.0.0", VIP, f);
  }

  /** New flows sent so far. */
  get created(): number {
    return this.#nextNew;
  }

  /** Spreads the next runs' new flows over these nodes (ECMP-like); established stay. */
  spread(learners: Datapath[]): void {
    this.#learners = learners;
  }

  #send(frame: Uint8Array, what: string, dp = this.#dp): void {
    const r = testRun(dp.program, frame);
    if (r.retval !== XDP.TX) throw new Error(`Cannot send ${what}: hf_lb returned ${r.retval}`);
  }

  /** A new flow from `saddr`: its SYN, then the ACK that confirms it. Returns the ACK. */
  #open(saddr: number, dp = this.#dp): Uint8Array {
    this.#send(patch(this.#syn, saddr, this.#family), "a new flow's SYN", dp);
    const ack = patch(this.#ack, saddr, this.#family);
    this.#send(ack, "a new flow's first ACK", dp);
    return ack;
  }

  /** Opens `n` established flows; later runs keep them active. */
  establish(n: number): void {
    for (let i = 0; i < n; i++) this.#established.push(this.#open((ESTABLISHED_BASE + i) >>> 0));
  }

  /**
   * For `seconds`: `rate` new flows per second and `ackRate` packets per second of the
   * established flows (round robin), paced in 5 ms ticks.
   */
  async run(rate: number, seconds: number, ackRate: number): Promise<GeneratorRun> {
    const t0 = performance.now();
    const end = t0 + seconds * 1000;
    let sentNew = 0;
    let sentAck = 0;
    for (let tick = 0; tick < 1_000_000; tick++) {
      const now = performance.now();
      if (now >= end) break;
      const elapsed = (now - t0) / 1000;
      // Catch up to the schedule, at most 0.1 s worth per tick (the machine may fall behind).
      const wantNew = Math.min(Math.floor(rate * elapsed) - sentNew, rate / 10);
      for (let i = 0; i < wantNew; i++, sentNew++) {
        const dp = this.#learners[this.#nextLearner++ % this.#learners.length]!;
        this.#open((NEW_BASE + this.#nextNew++) >>> 0, dp);
      }
      const wantAck = this.#established.length === 0
        ? 0
        : Math.min(Math.floor(ackRate * elapsed) - sentAck, ackRate / 10);
      for (let i = 0; i < wantAck; i++, sentAck++) {
        this.#send(this.#established[this.#nextAck++ % this.#established.length]!, "an ACK");
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    return { newFlows: sentNew, established: sentAck, seconds: (performance.now() - t0) / 1000 };
  }
}
