/**
 * The floating addresses a NAT pod holds: one state machine per address with one writer.
 *
 * `assume(addr)` and `forfeit(addr)` (the ownership's callbacks, and the agent's stop) change
 * what is *wanted* at once, synchronously, and tell the listener (the sync sender follows the
 * wanted set, the owned-addresses gauge reads it); a single worker per address then brings the
 * kernel there, one operation at a time:
 *
 * ```
 * released ──assume──▶ adding ──▶ held ──forfeit──▶ removing ──▶ released
 * ```
 *
 * A forfeit that arrives while an add runs waits for it, then removes; an assume that arrives
 * while a removal runs waits for it, then adds. So no interleaving of forfeit and assume can
 * leave an address wanted but removed, removed by a stale forfeit after a re-assume added it, or
 * held by the kernel while the sync sender streams nothing for it (issue 29: a forfeit that
 * awaited the removal and only then dropped the address from the owned set wiped a re-assume
 * that came in between). Each call's promise settles when the kernel has reached what it asked
 * for (or a later call superseded it); a failed operation rejects it.
 *
 * @module
 */

/** What the holder does to the kernel and the neighbours (the agent's: `ip` and ARP). */
export interface AddressOps {
  /** Gratuitous ARP, add the address and its gateway, announce again. */
  add(addr: string, epoch: number): Promise<void>;
  /** Remove the address and its gateway (absent is fine). */
  remove(addr: string, why: string): Promise<void>;
}

/** Where the kernel side of one address stands. */
export type HolderState = "released" | "adding" | "held" | "removing";

interface Waiter {
  want: boolean;
  resolve: () => void;
  reject: (err: unknown) => void;
}

interface Entry {
  want: boolean;
  state: HolderState;
  epoch: number;
  why: string;
  working: boolean;
  waiters: Waiter[];
}

/** Bound on the operations one worker runs back to back (flapping wants). */
const MAX_OPS_PER_RUN = 64;

/** Holds floating addresses; see the module doc. */
export class AddressHolder {
  readonly #ops: AddressOps;
  readonly #onChange: (wanted: ReadonlySet<string>, change: OwnedChange) => void;
  readonly #entries = new Map<string, Entry>();

  /**
   * `onChange` is called synchronously on every change of the wanted set, with the new set and
   * which address changed how.
   */
  constructor(
    ops: AddressOps,
    onChange: (wanted: ReadonlySet<string>, change: OwnedChange) => void = () => {},
  ) {
    this.#ops = ops;
    this.#onChange = onChange;
  }

  /** Wants `addr` held (epoch for the logs); resolves once it is. */
  assume(addr: string, epoch: number): Promise<void> {
    return this.#want(addr, true, epoch, "assumed");
  }

  /** Wants `addr` released; resolves once it is. */
  forfeit(addr: string, why: string): Promise<void> {
    return this.#want(addr, false, undefined, why);
  }

  /** The addresses wanted held now (what the sync sender streams and the gauge counts). */
  owned(): string[] {
    return [...this.#entries].filter(([, e]) => e.want).map(([a]) => a);
  }

  /** The kernel side of `addr` now. */
  state(addr: string): HolderState {
    return this.#entries.get(addr)?.state ?? "released";
  }

  /** Addresses the kernel may still hold (not released: held, or an operation runs or failed). */
  notReleased(): string[] {
    return [...this.#entries].filter(([, e]) => e.state !== "released").map(([a]) => a);
  }

  #want(addr: string, want: boolean, epoch: number | undefined, why: string): Promise<void> {
    let e = this.#entries.get(addr);
    if (!e) {
      e = { want: false, state: "released", epoch: 0, why: "", working: false, waiters: [] };
      this.#entries.set(addr, e);
    }
    const changed = e.want !== want;
    e.want = want;
    e.why = why;
    if (epoch !== undefined) e.epoch = epoch;
    const entry = e;
    const done = new Promise<void>((resolve, reject) =>
      entry.waiters.push({ want, resolve, reject })
    );
    if (changed) {
      this.#onChange(new Set(this.owned()), { address: addr, wanted: want, why });
    }
    if (!e.working) void this.#work(e, addr);
    return done;
  }

  /** The one writer of `addr`: runs operations until the kernel matches what is wanted. */
  async #work(e: Entry, addr: string): Promise<void> {
    e.working = true;
    try {
      for (let n = 0; n < MAX_OPS_PER_RUN && !this.#matches(e); n++) {
        const adding = e.want;
        e.state = adding ? "adding" : "removing";
        try {
          if (adding) await this.#ops.add(addr, e.epoch);
          else await this.#ops.remove(addr, e.why);
          e.state = adding ? "held" : "released";
          this.#settle(e, adding);
        } catch (err) {
          // Unknown how far it got: count it as held, so a later forfeit removes (idempotently).
          e.state = "held";
          this.#settle(e, adding, err);
          if (!adding) break; // a failed removal is retried by the next forfeit, not in a loop
        }
      }
    } finally {
      e.working = false;
      // Whatever is still waiting was superseded by a later call that has been served.
      for (const w of e.waiters.splice(0)) w.resolve();
    }
  }

  #matches(e: Entry): boolean {
    return e.state === (e.want ? "held" : "released");
  }

  #settle(e: Entry, reached: boolean, err?: unknown): void {
    const mine = e.waiters.filter((w) => w.want === reached);
    e.waiters = e.waiters.filter((w) => w.want !== reached);
    for (const w of mine) err === undefined ? w.resolve() : w.reject(err);
  }
}

/** One change of the wanted set. */
export interface OwnedChange {
  readonly address: string;
  /** True: now wanted held (assume); false: given up (forfeit, with why). */
  readonly wanted: boolean;
  readonly why: string;
}
