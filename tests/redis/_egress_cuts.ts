/**
 * Links a partition test can cut: a TCP proxy in front of Redis (one per pod, so one pod alone
 * loses Redis) and a UDP relay in front of a pod's heartbeat port (so heartbeats alone are lost).
 *
 * @module
 */
import dgram from "node:dgram";

/** A TCP proxy to `target` on a free loopback port; `cut` drops every connection, new ones too. */
export class CuttableProxy {
  readonly #listener: Deno.Listener;
  readonly #conns = new Set<Deno.Conn>();
  #cut = false;
  readonly #accepting: Promise<void>;

  constructor(readonly targetPort: number) {
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.#accepting = this.#accept();
  }

  /** Where to connect instead of Redis. */
  get url(): string {
    return `redis://127.0.0.1:${(this.#listener.addr as Deno.NetAddr).port}`;
  }

  /** Drops the connections now and refuses new ones until {@link restore}. */
  cut(): void {
    this.#cut = true;
    for (const c of this.#conns) this.#close(c);
  }

  /** Lets connections through again. */
  restore(): void {
    this.#cut = false;
  }

  #close(c: Deno.Conn): void {
    this.#conns.delete(c);
    try {
      c.close();
    } catch { /* closed */ }
  }

  async #accept(): Promise<void> {
    for await (const down of this.#listener) {
      if (this.#cut) {
        this.#close(down);
        continue;
      }
      let up: Deno.Conn;
      try {
        up = await Deno.connect({ hostname: "127.0.0.1", port: this.targetPort });
      } catch {
        this.#close(down);
        continue;
      }
      this.#conns.add(down);
      this.#conns.add(up);
      const end = () => {
        this.#close(down);
        this.#close(up);
      };
      down.readable.pipeTo(up.writable).catch(() => {}).finally(end);
      up.readable.pipeTo(down.writable).catch(() => {}).finally(end);
    }
  }

  /** Stops listening and drops every connection. */
  async close(): Promise<void> {
    this.cut();
    this.#listener.close();
    await this.#accepting.catch(() => {});
  }
}

/** A UDP relay on a free loopback port to `127.0.0.1:target` that can drop everything. */
export class CuttableRelay {
  readonly #socket = dgram.createSocket("udp4");
  /** Where the relay forwards to (set once the pod listens). */
  target = 0;
  cut = false;

  /** Binds the relay; its port is {@link port}. */
  async start(): Promise<void> {
    this.#socket.on("error", () => {}); // a closed target port: ICMP errors are not our concern
    this.#socket.on("message", (msg: Uint8Array) => {
      if (!this.cut && this.target) this.#socket.send(msg, this.target, "127.0.0.1");
    });
    await new Promise<void>((resolve) => this.#socket.bind(0, "127.0.0.1", () => resolve()));
  }

  /** The relay's port. */
  get port(): number {
    return this.#socket.address().port;
  }

  /** Stops relaying. */
  close(): Promise<void> {
    return new Promise((resolve) => this.#socket.close(() => resolve()));
  }
}
