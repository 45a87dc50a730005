/**
 * TCP peer for the datapath end-to-end test, run inside namespaces.
 *
 *   server NAME HOST PORT [drain]  line protocol per connection (HOST "::": both families):
 *                                  "HELLO" → "NAME PEER_IP:PEER_PORT" (the address the server sees)
 *                                  "UP n" + n bytes → "NAME GOT n SUM"; "DOWN n" → n bytes.
 *                                  With `drain`, after SIGTERM the server exits once no connection
 *                                  is open (a pod's graceful shutdown: it keeps listening, so its
 *                                  readiness holds and its endpoint stays serving while it drains).
 *   client HOST PORT COUNT CONC    COUNT connections (CONC at a time): HELLO, check the server saw
 *                                  our own address and port, close. Prints one JSON summary.
 *   hold HOST PORT COUNT GO1 GO2   COUNT connections held open: HELLO; then after each file GOi
 *                                  appears, HELLO again on every connection and compare backends
 *                                  (phase 0 counts held connections `by` backend; a phase lists
 *                                  broken ones `brokenBy` backend when there are any). Deadline
 *                                  60 s, or env LB_PEER_DEADLINE_MS.
 *   bulk HOST PORT BYTES TIMEOUT   one connection: UP BYTES and DOWN BYTES, verified, within TIMEOUT ms.
 *   watch HOST PORT MS STOP [CONC] new connections (HELLO, close), CONC (8) at a time, each given up
 *                                  after 500 ms, until MS ms passed or file STOP appears; prints
 *                                  {"msg":"first","backend","t"} (t: Date.now()) the first time each
 *                                  backend answers, then one JSON summary (with connections/s).
 *
 * Every loop is bounded by count and a deadline.
 *
 * @module
 */

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Reads lines and exact byte counts from a connection. */
class Reader {
  #buf = new Uint8Array(0);
  constructor(readonly conn: Deno.Conn) {}
  async #fill(): Promise<boolean> {
    const chunk = new Uint8Array(65536);
    const n = await this.conn.read(chunk);
    if (n === null) return false;
    const next = new Uint8Array(this.#buf.length + n);
    next.set(this.#buf);
    next.set(chunk.subarray(0, n), this.#buf.length);
    this.#buf = next;
    return true;
  }
  async line(): Promise<string | null> {
    for (;;) {
      const i = this.#buf.indexOf(10);
      if (i >= 0) {
        const l = dec.decode(this.#buf.subarray(0, i));
        this.#buf = this.#buf.slice(i + 1);
        return l;
      }
      if (!(await this.#fill())) return null;
    }
  }
  /** Consumes n bytes, returning their byte sum (mod 2^32), or null on EOF. */
  async bytes(n: number): Promise<number | null> {
    let sum = 0;
    let left = n;
    while (left > 0) {
      if (this.#buf.length === 0 && !(await this.#fill())) return null;
      const take = Math.min(left, this.#buf.length);
      for (let i = 0; i < take; i++) sum = (sum + this.#buf[i]!) >>> 0;
      this.#buf = this.#buf.slice(take);
      left -= take;
    }
    return sum;
  }
}

/** conn.write may write less than asked: loop until everything is out. */
async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

function pattern(n: number): { data: Uint8Array; sum: number } {
  const data = new Uint8Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    data[i] = (i * 7 + 3) & 0xff;
    sum = (sum + data[i]!) >>> 0;
  }
  return { data, sum };
}

async function serve(name: string, hostname: string, port: number, drain: boolean): Promise<void> {
  const listener = Deno.listen({ hostname, port });
  console.log(JSON.stringify({ msg: "listening", name, hostname, port }));
  let open = 0, draining = false;
  if (drain) {
    Deno.addSignalListener("SIGTERM", () => {
      draining = true;
      console.log(JSON.stringify({ msg: "draining", open }));
      if (open === 0) Deno.exit(0);
    });
  }
  for await (const conn of listener) {
    const peer = conn.remoteAddr as Deno.NetAddr;
    // Listening on "::" takes IPv4 too, as IPv4-mapped addresses: reported as the IPv4 address.
    const seen = peer.hostname.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, "");
    open++;
    (async () => {
      const r = new Reader(conn);
      try {
        for (let i = 0; i < 1000; i++) {
          const l = await r.line();
          if (l === null) break;
          const [cmd, arg] = l.split(" ");
          if (cmd === "HELLO") {
            await conn.write(enc.encode(`${name} ${seen}:${peer.port}\n`));
          } else if (cmd === "UP") {
            const sum = await r.bytes(Number(arg));
            if (sum === null) break;
            await conn.write(enc.encode(`${name} GOT ${arg} ${sum}\n`));
          } else if (cmd === "DOWN") await writeAll(conn, pattern(Number(arg)).data);
          else break;
        }
      } catch { /* reset by peer */ }
      try {
        conn.close();
      } catch { /* closed */ }
      if (--open === 0 && draining) Deno.exit(0);
    })();
  }
}

interface Hello {
  backend: string;
  seen: string;
}

async function hello(conn: Deno.Conn, r: Reader): Promise<Hello> {
  await conn.write(enc.encode("HELLO\n"));
  const l = await r.line();
  if (l === null) throw new Error("connection closed before the HELLO reply");
  const [backend = "", seen = ""] = l.split(" ");
  return { backend, seen };
}

function own(conn: Deno.Conn): string {
  const a = conn.localAddr as Deno.NetAddr;
  return `${a.hostname}:${a.port}`;
}

async function client(hostname: string, port: number, count: number, conc: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  const spread: Record<string, number> = {};
  let ok = 0, failed = 0, wrongPeer = 0, next = 0;
  const errors: string[] = [];
  const worker = async () => {
    while (next < count && Date.now() < deadline) {
      next++;
      try {
        const conn = await Deno.connect({ hostname, port });
        try {
          const h = await hello(conn, new Reader(conn));
          spread[h.backend] = (spread[h.backend] ?? 0) + 1;
          if (h.seen !== own(conn)) wrongPeer++;
          else ok++;
        } finally {
          conn.close();
        }
      } catch (e) {
        failed++;
        if (errors.length < 5) errors.push(String(e));
      }
    }
  };
  await Promise.all(Array.from({ length: conc }, worker));
  console.log(JSON.stringify({ msg: "done", ok, failed, wrongPeer, spread, errors }));
}

async function waitFile(path: string, deadline: number): Promise<void> {
  while (Date.now() < deadline) {
    try {
      await Deno.stat(path);
      return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for "${path}"`);
}

async function hold(
  hostname: string,
  port: number,
  count: number,
  goFiles: string[],
): Promise<void> {
  const env = "LB_PEER_DEADLINE_MS";
  const allowed = Deno.permissions.querySync({ name: "env", variable: env }).state === "granted";
  const deadline = Date.now() + Number((allowed ? Deno.env.get(env) : undefined) ?? 60_000);
  const conns: Array<{ conn: Deno.Conn; r: Reader; backend: string }> = [];
  let failed = 0;
  for (let i = 0; i < count && Date.now() < deadline; i++) {
    try {
      const conn = await Deno.connect({ hostname, port });
      const r = new Reader(conn);
      const h = await hello(conn, r);
      conns.push({ conn, r, backend: h.backend });
    } catch {
      failed++;
    }
  }
  const by: Record<string, number> = {};
  for (const c of conns) by[c.backend] = (by[c.backend] ?? 0) + 1;
  console.log(JSON.stringify({ msg: "phase", phase: 0, held: conns.length, failed, by }));
  for (const [i, go] of goFiles.entries()) {
    await waitFile(go, deadline);
    let same = 0, moved = 0, broken = 0;
    const brokenBy: Record<string, number> = {};
    await Promise.all(conns.map(async (c) => {
      try {
        const h = await hello(c.conn, c.r);
        if (h.backend === c.backend) same++;
        else moved++;
      } catch {
        broken++;
        brokenBy[c.backend] = (brokenBy[c.backend] ?? 0) + 1;
      }
    }));
    const extra = broken > 0 ? { brokenBy } : {};
    console.log(JSON.stringify({ msg: "phase", phase: i + 1, same, moved, broken, ...extra }));
  }
  for (const c of conns) c.conn.close();
}

async function bulk(
  hostname: string,
  port: number,
  bytes: number,
  timeoutMs: number,
): Promise<void> {
  const started = performance.now();
  const conn = await Deno.connect({ hostname, port });
  const timer = setTimeout(() => {
    console.log(
      JSON.stringify({ msg: "bulk", ok: false, reason: `timeout after ${timeoutMs} ms` }),
    );
    Deno.exit(1);
  }, timeoutMs);
  const r = new Reader(conn);
  const { data, sum } = pattern(bytes);
  const upStarted = performance.now();
  await conn.write(enc.encode(`UP ${bytes}\n`));
  await writeAll(conn, data);
  const up = await r.line();
  const downStarted = performance.now();
  await conn.write(enc.encode(`DOWN ${bytes}\n`));
  const downSum = await r.bytes(bytes);
  const done = performance.now();
  clearTimeout(timer);
  conn.close();
  const upOk = up !== null && up.split(" ")[3] === String(sum);
  console.log(
    JSON.stringify({
      msg: "bulk",
      ok: upOk && downSum === sum,
      up,
      downOk: downSum === sum,
      ms: Math.round(performance.now() - started),
      // Each direction's own time: UP (client → server) until the server's count came back,
      // DOWN (server → client) until the last byte arrived.
      up_ms: +(downStarted - upStarted).toFixed(1),
      down_ms: +(done - downStarted).toFixed(1),
    }),
  );
}

async function watch(
  hostname: string,
  port: number,
  ms: number,
  stop: string,
  conc: number,
): Promise<void> {
  const started = Date.now(), deadline = started + ms, seen = new Set<string>();
  let ok = 0, failed = 0, stopped = false;
  const attempt = async () => {
    const conn = await Deno.connect({ hostname, port });
    try {
      return (await hello(conn, new Reader(conn))).backend;
    } finally {
      conn.close();
    }
  };
  const worker = async () => {
    while (Date.now() < deadline && !stopped) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<null>((r) => timer = setTimeout(() => r(null), 500));
      const backend = await Promise.race([attempt().catch(() => null), late]);
      clearTimeout(timer);
      if (backend === null) {
        failed++;
        continue;
      }
      ok++;
      if (!seen.has(backend)) {
        seen.add(backend);
        console.log(JSON.stringify({ msg: "first", backend, t: Date.now() }));
      }
    }
  };
  const stopper = (async () => {
    while (Date.now() < deadline && !stopped) {
      await waitFile(stop, Math.min(deadline, Date.now() + 100)).then(
        () => stopped = true,
        () => {},
      );
    }
  })();
  await Promise.all([...Array.from({ length: conc }, worker), stopper]);
  const perS = Math.round(ok / ((Date.now() - started) / 1000));
  console.log(JSON.stringify({ msg: "done", ok, failed, per_s: perS, backends: [...seen] }));
  Deno.exit(0); // attempts given up on may still be pending
}

const [mode, ...args] = Deno.args;
if (mode === "server") await serve(args[0]!, args[1]!, Number(args[2]), args[3] === "drain");
else if (mode === "client") {
  await client(args[0]!, Number(args[1]), Number(args[2]), Number(args[3] ?? 10));
} else if (mode === "hold") await hold(args[0]!, Number(args[1]), Number(args[2]), args.slice(3));
else if (mode === "bulk") {
  await bulk(args[0]!, Number(args[1]), Number(args[2]), Number(args[3] ?? 10_000));
} else if (mode === "watch") {
  await watch(args[0]!, Number(args[1]), Number(args[2]), args[3]!, Number(args[4] ?? 8));
} else {
  console.error(
    `usage: _lb_peer.ts server|client|hold|bulk|watch ..., got ${JSON.stringify(mode)}`,
  );
  Deno.exit(2);
}
