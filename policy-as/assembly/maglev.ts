// Maglev table fill of the policy module (re-exported by index.ts).

import { align16, HEALTH_RECORD_BYTES } from "./memory";

// ---------------------------------------------------------------------------------------------
// Maglev (Eisenbud et al., NSDI'16, "populate"), weighted by credit rounds: in round r a backend
// of weight w has had floor(r * w / maxWeight) turns, so the heaviest takes one every round.
//
// Cost: the classic walk probes about M ln M slots, most of them at the end when few slots are
// empty. Three things keep it cheap without changing a single slot: occupancy lives in a byte per
// slot (M bytes, stays in L1; a byte test is fewer instructions per probe than a bit in a word)
// instead of the 4-byte table; with equal weights the walk runs in a loop of its own (no weight or
// phase tests per turn); and once at most sqrt(M)/2 slots are empty a backend finds its next
// preference directly: the empty slot e with the smallest j = (e - pos) * skip^-1 mod M, which is
// exactly the one the walk would reach first. (Measured at M = 16,381, 10 backends: 0.30 ms per
// table before the byte map and the equal-weights loop, 0.25 ms after; the tail from sqrt(M)/2
// instead of sqrt(M) empties saves ~5 % more.)

const MAGLEV_ERR_M_RANGE: i32 = -1;   // M outside 251..131071
const MAGLEV_ERR_M_NOT_PRIME: i32 = -2;
const MAGLEV_ERR_N_OVER_M: i32 = -3;
const MAGLEV_ERR_NO_MEMORY: i32 = -4;  // maglev_input_ptr(n, m) not called or failed
const MAGLEV_ERR_DUPLICATE_KEY: i32 = -5;

const M_MIN: u32 = 251;
const M_MAX: u32 = 131071;

let reservedN: u32 = 0;
let reservedM: u32 = 0;
let inPtr: usize = 0;     // n × {h1, h2, weight}
let tablePtr: usize = 0;  // m × u32
let orderPtr: usize = 0;  // n × u32, input indices sorted by key
let posPtr: usize = 0;    // n × u32, next candidate slot per sorted backend
let skipPtr: usize = 0;   // n × u32
let weightPtr: usize = 0; // n × u32
let idxPtr: usize = 0;    // n × u32, input index + 1 per sorted backend
let targetPtr: usize = 0; // n × u64, credit threshold per sorted backend
let invPtr: usize = 0;    // n × u32, skip^-1 mod m per sorted backend (tail phase)
let bitmapPtr: usize = 0; // m bytes (rounded up to 8): 1 = slot taken
let emptyPtr: usize = 0;  // tail × u32, the empty slots in the tail phase

// Build state, valid during maglev_build.
let gM: u32 = 0;

// Empty slots left when the walk stops: floor(sqrt(m)) / 2, at least 8.
function tailThreshold(m: u32): u32 {
  let r: u32 = 1;
  while ((r + 1) * (r + 1) <= m) r++;
  r = r >> 1;
  return r < 8 ? 8 : r;
}

export function maglev_input_ptr(n: u32, m: u32): usize {
  if (m > M_MAX || n > m) return 0;
  const nn = <usize>n;
  let p = align16(__heap_base) + HEALTH_RECORD_BYTES;
  const inP = p; p = align16(p + nn * 12);
  const tP = p; p = align16(p + <usize>m * 4);
  const oP = p; p = align16(p + nn * 4);
  const posP = p; p = align16(p + nn * 4);
  const sP = p; p = align16(p + nn * 4);
  const wP = p; p = align16(p + nn * 4);
  const iP = p; p = align16(p + nn * 4);
  const tgP = p; p = align16(p + nn * 8);
  const invP = p; p = align16(p + nn * 4);
  const bmP = p; p = align16(p + ((<usize>m + 7) & ~(<usize>7)));
  const eP = p; p = align16(p + (<usize>tailThreshold(m) + 1) * 4);
  const pagesNeeded = <i32>((p + 0xffff) >>> 16);
  const have = memory.size();
  if (pagesNeeded > have) {
    if (memory.grow(pagesNeeded - have) < 0) return 0;
  }
  reservedN = n; reservedM = m;
  inPtr = inP; tablePtr = tP; orderPtr = oP; posPtr = posP;
  skipPtr = sP; weightPtr = wP; idxPtr = iP; targetPtr = tgP;
  invPtr = invP; bitmapPtr = bmP; emptyPtr = eP;
  return inPtr;
}

export function maglev_table_ptr(): usize {
  return tablePtr;
}

function isPrime(m: u32): bool {
  if (m < 2) return false;
  if ((m & 1) == 0) return m == 2;
  for (let d: u32 = 3; d * d <= m; d += 2) {
    if (m % d == 0) return false;
  }
  return true;
}

// Inverse of a modulo prime m (extended Euclid in i32: every value stays below 2^18).
function modInverse(a: u32, m: u32): u32 {
  let t: i32 = 0, newT: i32 = 1;
  let r: i32 = <i32>m, newR: i32 = <i32>a;
  while (newR != 0) {
    const q = r / newR;
    const t2 = t - q * newT; t = newT; newT = t2;
    const r2 = r - q * newR; r = newR; newR = r2;
  }
  if (t < 0) t += <i32>m;
  return <u32>t;
}

// Key order of input records a and b: (h1, h2); returns true when a sorts before b.
@inline
function keyLess(a: u32, b: u32): bool {
  const pa = inPtr + <usize>a * 12;
  const pb = inPtr + <usize>b * 12;
  const a1 = load<u32>(pa);
  const b1 = load<u32>(pb);
  if (a1 != b1) return a1 < b1;
  return load<u32>(pa, 4) < load<u32>(pb, 4);
}

function siftDown(start: u32, end: u32): void {
  let root = start;
  while (true) {
    let child = root * 2 + 1;
    if (child >= end) return;
    let cv = load<u32>(orderPtr + (<usize>child << 2));
    if (child + 1 < end) {
      const rv = load<u32>(orderPtr + (<usize>(child + 1) << 2));
      if (keyLess(cv, rv)) { child++; cv = rv; }
    }
    const rootv = load<u32>(orderPtr + (<usize>root << 2));
    if (!keyLess(rootv, cv)) return;
    store<u32>(orderPtr + (<usize>root << 2), cv);
    store<u32>(orderPtr + (<usize>child << 2), rootv);
    root = child;
  }
}

// Heap sort of `count` input indices by key: O(n log n), no allocation.
function sortOrder(count: u32): void {
  if (count < 2) return;
  let start = (count - 2) / 2;
  while (true) {
    siftDown(start, count);
    if (start == 0) break;
    start--;
  }
  let end = count - 1;
  while (end > 0) {
    const t = load<u32>(orderPtr);
    store<u32>(orderPtr, load<u32>(orderPtr + (<usize>end << 2)));
    store<u32>(orderPtr + (<usize>end << 2), t);
    siftDown(0, end);
    end--;
  }
}

// Lists the empty slots, 8 bytes of the map at a time; returns how many there are. Inverses of the
// skips are computed lazily, only for backends that take a turn in the tail (0 = not yet).
function enterTail(count: u32): u32 {
  const m = gM;
  let e: u32 = 0;
  for (let c: u32 = 0; c < m; c += 8) {
    const w = load<u64>(bitmapPtr + <usize>c);
    if (w == 0x0101010101010101) continue;
    const end = c + 8 < m ? c + 8 : m;
    for (let d = c; d < end; d++) {
      if (load<u8>(bitmapPtr + <usize>d) == 0) {
        store<u32>(emptyPtr + (<usize>e << 2), d);
        e++;
      }
    }
  }
  memory.fill(invPtr, 0, <usize>count << 2);
  return e;
}

export function maglev_build(n: u32, m: u32): i32 {
  if (m < M_MIN || m > M_MAX) return MAGLEV_ERR_M_RANGE;
  if (!isPrime(m)) return MAGLEV_ERR_M_NOT_PRIME;
  if (n > m) return MAGLEV_ERR_N_OVER_M;
  if (inPtr == 0 || n > reservedN || m != reservedM) return MAGLEV_ERR_NO_MEMORY;

  memory.fill(tablePtr, 0, <usize>m << 2);
  memory.fill(bitmapPtr, 0, (<usize>m + 7) & ~(<usize>7));

  // Backends with weight 0 are excluded before anything else.
  let count: u32 = 0;
  let maxW: u32 = 0;
  let minW: u32 = 0xffffffff;
  for (let i: u32 = 0; i < n; i++) {
    const w = load<u32>(inPtr + <usize>i * 12, 8);
    if (w == 0) continue;
    store<u32>(orderPtr + (<usize>count << 2), i);
    count++;
    if (w > maxW) maxW = w;
    if (w < minW) minW = w;
  }
  if (count == 0) return 0;

  sortOrder(count);

  const mm1 = m - 1;
  for (let k: u32 = 0; k < count; k++) {
    const i = load<u32>(orderPtr + (<usize>k << 2));
    const rec = inPtr + <usize>i * 12;
    const h1 = load<u32>(rec);
    const h2 = load<u32>(rec, 4);
    if (k > 0) {
      const prev = inPtr + <usize>load<u32>(orderPtr + (<usize>(k - 1) << 2)) * 12;
      if (load<u32>(prev) == h1 && load<u32>(prev, 4) == h2) return MAGLEV_ERR_DUPLICATE_KEY;
    }
    const off = <usize>k << 2;
    store<u32>(posPtr + off, h1 % m);
    store<u32>(skipPtr + off, h2 % mm1 + 1);
    store<u32>(weightPtr + off, load<u32>(rec, 8));
    store<u32>(idxPtr + off, i + 1);
    store<u64>(targetPtr + (<usize>k << 3), <u64>maxW);
  }

  gM = m;
  const tail = tailThreshold(m);
  const equal = minW == maxW;
  const bm = bitmapPtr;
  const tp = tablePtr;
  const pp = posPtr;
  const sp = skipPtr;
  const ip = idxPtr;
  const ep = emptyPtr;
  const mf = <f64>m;
  const rm = 1.0 / mf;
  let filled: u32 = 0;
  let inTail = false;
  let empties: u32 = 0;
  let k0: u32 = 0;
  if (equal) {
    // Equal weights, until the tail: plain round robin, the walk alone (no per-turn phase tests).
    const limit = m - tail;
    let k: u32 = 0;
    while (filled < limit) {
      const off = <usize>k << 2;
      let c = load<u32>(pp + off);
      const skip = load<u32>(sp + off);
      while (load<u8>(bm + <usize>c) != 0) {
        c += skip;
        c = select<u32>(c - m, c, c >= m);
      }
      store<u8>(bm + <usize>c, 1);
      store<u32>(tp + (<usize>c << 2), load<u32>(ip + off));
      c += skip;
      store<u32>(pp + off, select<u32>(c - m, c, c >= m));
      filled++;
      k++;
      k = select<u32>(0, k, k == count);
    }
    empties = enterTail(count);
    inTail = true;
    k0 = k;
  }
  // Round r lets backend k take a turn while r * w_k >= target_k (target += maxW): with equal
  // weights every backend takes one turn per round, the paper's plain round robin.
  for (let round: u64 = 1; ; round++) {
    const first = k0;
    k0 = 0;
    for (let k: u32 = first; k < count; k++) {
      if (!equal) {
        const tgp = targetPtr + (<usize>k << 3);
        const target = load<u64>(tgp);
        if (round * <u64>load<u32>(weightPtr + (<usize>k << 2)) < target) continue;
        store<u64>(tgp, target + <u64>maxW);
      }
      const off = <usize>k << 2;
      let c = load<u32>(pp + off);
      const skip = load<u32>(sp + off);
      if (!inTail) {
        while (load<u8>(bm + <usize>c) != 0) {
          // The wrap is taken about half the time at random: a select, not a branch.
          c += skip;
          c = select<u32>(c - m, c, c >= m);
        }
        store<u8>(bm + <usize>c, 1);
      } else {
        // j = diff * inv mod m in f64: the product is below 2^35, exact; the quotient estimate
        // is off by at most one, fixed below. Much cheaper than a 64-bit division per slot.
        let invU = load<u32>(invPtr + off);
        if (invU == 0) {
          invU = modInverse(skip, m);
          store<u32>(invPtr + off, invU);
        }
        const inv = <f64>invU;
        let best: f64 = Infinity;
        let bestI: u32 = 0;
        for (let i: u32 = 0; i < empties; i++) {
          const e = load<u32>(ep + (<usize>i << 2));
          const diff: u32 = select<u32>(e - c, e + m - c, e >= c);
          const prod = <f64>diff * inv;
          let j = prod - Math.floor(prod * rm) * mf;
          j = select<f64>(j + mf, j, j < 0);
          j = select<f64>(j - mf, j, j >= mf);
          const better = j < best;
          best = select<f64>(j, best, better);
          bestI = select<u32>(i, bestI, better);
        }
        c = load<u32>(ep + (<usize>bestI << 2));
        empties--;
        store<u32>(ep + (<usize>bestI << 2), load<u32>(ep + (<usize>empties << 2)));
      }
      store<u32>(tp + (<usize>c << 2), load<u32>(ip + off));
      c += skip;
      store<u32>(pp + off, select<u32>(c - m, c, c >= m));
      filled++;
      if (filled == m) return <i32>count;
      if (!inTail && m - filled <= tail) {
        empties = enterTail(count);
        inTail = true;
      }
    }
  }
  return <i32>count; // unreachable: the loop returns once every slot is filled
}
