/**
 * Which NAT pod owns which floating address: a pure function of the address list and the live
 * pods, so every pod computes the same answer from the same inputs without talking.
 *
 * Rendezvous (highest random weight) hashing ranks the pods per address; a greedy pass over all
 * (address, pod) pairs, best score first, gives each address its best-ranked pod that still has
 * room, where "room" keeps every pod at ⌊N/P⌋ or ⌈N/P⌉ addresses (spread within ±1). A joining
 * pod takes about N/(P+1) addresses. Balance and perfect stability cannot both hold for every
 * set of pods (a function that never moves a survivor's address is plain rendezvous hashing,
 * which can put 3 addresses on 1 of 3 pods): after a death the bounded loads also move a few
 * survivors' addresses (at most as many as the dead pod had, `assign_test.ts`). The ownership
 * (`ownership.ts`) moves only the dead pod's addresses at once, to their first standby, and the
 * rest later by planned handover (conntrack flushed first, zero resets).
 *
 * The first standby of an address is, by definition, its owner in the assignment without the
 * current owner: what every pod will compute once that owner is gone, so the pod that holds the
 * synced conntrack state and the pod that takes over are the same. Further standbys follow the
 * address's rendezvous ranking.
 *
 * @example
 * ```ts
 * import { assignAddresses } from "./assign.ts";
 * const a = assignAddresses(["198.18.0.100", "198.18.0.101"], ["nat1", "nat2"]);
 * const owners = [...a.values()].map((x) => x.owner).sort();
 * if (owners.join() !== "nat1,nat2") throw new Error(`unbalanced: ${owners}`);
 * ```
 *
 * @module
 */

import { murmur3String } from "../../policy-as/host/key_hash.ts";

/** Seed of the rendezvous hash (fixed: every pod must compute the same scores). */
const RENDEZVOUS_SEED = 0x65677273;

/** Owner and standbys of one address. */
export interface Assignment {
  /** The pod that holds the address. */
  readonly owner: string;
  /** The pods that take over, in order (the first is the owner if `owner` is gone). */
  readonly standbys: readonly string[];
}

/** Options of {@link assignAddresses}. */
export interface AssignOptions {
  /** How many standbys per address (default: every other pod). */
  readonly standbys?: number;
}

/** The rendezvous score of `pod` for `address` (higher wins). */
export function rendezvousScore(address: string, pod: string): number {
  return murmur3String(`${address}\n${pod}`, RENDEZVOUS_SEED);
}

function byText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Pods ranked for `address`, best first; ties (32-bit collisions) by name. */
function ranked(address: string, pods: readonly string[]): string[] {
  return pods.map((pod) => ({ pod, score: rendezvousScore(address, pod) }))
    .sort((x, y) => y.score - x.score || byText(x.pod, y.pod))
    .map((x) => x.pod);
}

/** Owner per address with every pod at ⌊N/P⌋ or ⌈N/P⌉ addresses. */
function balancedOwners(
  addresses: readonly string[],
  pods: readonly string[],
): Map<string, string> {
  const owners = new Map<string, string>();
  if (pods.length === 0) return owners;
  const pairs: { address: string; pod: string; score: number }[] = [];
  for (const address of addresses) {
    for (const pod of pods) pairs.push({ address, pod, score: rendezvousScore(address, pod) });
  }
  pairs.sort((x, y) => y.score - x.score || byText(x.address, y.address) || byText(x.pod, y.pod));
  const floor = Math.floor(addresses.length / pods.length);
  const extra = addresses.length % pods.length; // pods allowed one above floor
  const load = new Map<string, number>(pods.map((p) => [p, 0]));
  let atCeil = 0;
  for (const { address, pod } of pairs) {
    if (owners.has(address)) continue;
    const l = load.get(pod)!;
    if (l < floor) {
      load.set(pod, l + 1);
      owners.set(address, pod);
    } else if (l === floor && atCeil < extra) {
      load.set(pod, l + 1);
      atCeil++;
      owners.set(address, pod);
    }
    if (owners.size === addresses.length) break;
  }
  return owners;
}

function sortedUnique(items: readonly string[]): string[] {
  return [...new Set(items)].sort(byText);
}

/**
 * Owner and ordered standbys of every address over the live pods. Deterministic: input order
 * and duplicates do not matter. No pods: an empty map.
 */
export function assignAddresses(
  addresses: readonly string[],
  pods: readonly string[],
  options: AssignOptions = {},
): Map<string, Assignment> {
  const addrs = sortedUnique(addresses);
  const live = sortedUnique(pods);
  const out = new Map<string, Assignment>();
  if (live.length === 0) return out;
  const owners = balancedOwners(addrs, live);
  // The first standby of X's addresses: their owners once X is gone (one pass per owner pod).
  const without = new Map<string, Map<string, string>>();
  const maxStandbys = Math.max(0, Math.min(options.standbys ?? live.length - 1, live.length - 1));
  for (const address of addrs) {
    const owner = owners.get(address)!;
    const standbys: string[] = [];
    if (maxStandbys > 0) {
      let next = without.get(owner);
      if (!next) {
        without.set(owner, next = balancedOwners(addrs, live.filter((p) => p !== owner)));
      }
      const first = next.get(address)!;
      standbys.push(first);
      for (const pod of ranked(address, live)) {
        if (standbys.length >= maxStandbys) break;
        if (pod !== owner && pod !== first) standbys.push(pod);
      }
    }
    out.set(address, { owner, standbys });
  }
  return out;
}
